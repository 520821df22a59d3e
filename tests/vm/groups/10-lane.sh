#!/usr/bin/env bash
# The lane itself: one VM with the veth pair and rxe0/rxe1, as every other group expects.
. "$(dirname "$0")/../lib.sh"
vm_boot

check lane-two-rxe-devices bash -c '[ -d /sys/class/infiniband/rxe0 ] && [ -d /sys/class/infiniband/rxe1 ]'
check lane-ports-active bash -c 'grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state &&
  grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state'
check lane-ipv4-gids bash -c 'grep -qx 0000:0000:0000:0000:0000:ffff:c0a8:4d01 /sys/class/infiniband/rxe0/ports/1/gids/1 &&
  grep -qx 0000:0000:0000:0000:0000:ffff:c0a8:4d02 /sys/class/infiniband/rxe1/ports/1/gids/1'
check lane-umad-devices bash -c '[ -c /dev/infiniband/umad0 ] && [ -c /dev/infiniband/umad1 ]'
check lane-no-kernel-cm bash -c '! grep -qE "^(ib_cm|rdma_cm) " /proc/modules'
check lane-host-tree-visible test -f "$VM_DIR/lib.sh" -a -d "$USCM_VM_BIN"
# real RC data rxe1 -> veth1 -> veth0 -> rxe0 with the stock tool, as a lane sanity check
check lane-rc-pingpong bash -c 'ibv_rc_pingpong -d rxe0 -g 1 -n 20 >/tmp/s 2>&1 & s=$!
  for i in $(seq 150); do ibv_rc_pingpong -d rxe1 -g 1 -n 20 192.168.77.1 && { wait $s; exit $?; }; sleep 0.2; done; exit 1'
group_end
