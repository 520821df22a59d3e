#!/usr/bin/env bash
# One small C program per seed behaviour of issue 13 (tests/vm/behaviour/, built against
# the system's <rdma/rdma_cma.h> with -lrdmacm, no uscm header), run twice in the VM
# pair: first both VMs on the kernel's rdma_cm with the system's librdmacm, then, after
# both unloaded rdma_ucm / rdma_cm / ib_cm, both on uscm's drop-in (LD_LIBRARY_PATH).
# The two outputs of each program are compared line for line (one check per program
# and side). The programs print only deterministic values; the differences that stay
# are in docs/API.md ("What the behaviour programs show").
#   mc_join   (a alone) rdma_join_multicast / _ex with each join flag, bad arguments, and
#             the joins of a UD RDMA_PS_IB id (rdma_create_ep from ai_qp_type UD: its
#             MULTICAST_JOIN's Q_Key, rdma_init_qp_attr's) and of an RC one (refused)
#   set_option (a alone) each option, good and bad values, and its visible effect
#   port_bind (a alone, with a second address on its NIC) which binds and listens share
#             a port: AFONLY, two addresses, wildcard, REUSEADDR, no such address, <1024
#   reject    (b server, a client) rdma_reject with 148 bytes; the REJECTED event
#   ece       (b server, a client) set_local_ece / get_remote_ece / reject_ece, then an
#             accepted connection: the ECE each side sees
#   device_facts (b server, a client) id->verbs from rdma_get_devices, one PD per device,
#             SRQ, create_qp_ex, ACK_TIMEOUT as the RTS timeout, rdma_notify
#   gid_moved -f (b server of 2 connections, a client) fork(): the parent resolves (its
#             port opened; on uscm through the uscmd the library starts, USCM_USCMD), the
#             child's calls on the parent's channel and id (EACCES), the child's own
#             connection, then the parent's with an echo (issue 13)
# targets: //api/librdmacm:librdmacm.so.1 //tests/vm/behaviour:mc_join
# targets: //tests/vm/behaviour:reject //tests/vm/behaviour:set_option //tests/vm/behaviour:ece
# targets: //tests/vm/behaviour:port_bind //tests/vm/behaviour:device_facts
# targets: //tests/vm/behaviour:gid_moved //tools:uscmd
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --cm-b --timeout 400

B=$USCM_VM_BIN/tests/vm/behaviour
LIB=$USCM_VM_BIN/api/librdmacm
IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
T=120
# A second IPv4 address on a's NIC (/32: no route changes) for port_bind, and
# until rxe has its RoCE v2 GID for it (IPv4-mapped: ::ffff:c0a8:4d65 in sysfs for 192.168.77.101).
SECOND=${IP%.*}.$(( ${IP##*.} + 100 ))
second_address() {
  local nic gid i
  nic=$(ip -o -4 addr show | awk -v ip="$IP" '$4 ~ "^" ip "/" {print $2}')
  ip addr add "$SECOND/32" dev "$nic" || return 1
  gid=$(printf 'ffff:%02x%02x:%02x%02x' ${SECOND//./ })
  for ((i = 0; i < T * 10; i++)); do
    grep -qs "$gid" /sys/class/infiniband/*/ports/1/gids/* && return 0
    sleep 0.1
  done
  return 1
}

# phase MODE PORT: every program once, on the kernel (MODE kernel) or the drop-in
phase() {
  local mode=$1 port=$2 run=(timeout $T) pid
  [ "$mode" = uscm ] && run=(env LD_LIBRARY_PATH="$LIB" USCM_DEBUG=1 timeout $T)
  if [ "$USCM_VM_ROLE" = a ]; then
    "${run[@]}" "$B/mc_join" "$IP" 239.1.3.1 > /tmp/$mode-mc_join.out 2> /tmp/$mode-mc_join.err
    "${run[@]}" "$B/set_option" "$IP" "$PEER" 7602 > /tmp/$mode-set_option.out \
      2> /tmp/$mode-set_option.err
    "${run[@]}" "$B/port_bind" "$IP" "$SECOND" 7610 > /tmp/$mode-port_bind.out \
      2> /tmp/$mode-port_bind.err
    sync.sh wait $mode-reject-listening $T
    "${run[@]}" "$B/reject" -c "$PEER" "$port" > /tmp/$mode-reject-c.out 2> /tmp/$mode-reject-c.err
    sync.sh wait $mode-ece-listening $T
    "${run[@]}" "$B/ece" -c "$PEER" $((port + 10)) > /tmp/$mode-ece-c.out 2> /tmp/$mode-ece-c.err
    sync.sh wait $mode-facts-listening $T
    "${run[@]}" "$B/device_facts" -c "$PEER" $((port + 20)) > /tmp/$mode-facts-c.out \
      2> /tmp/$mode-facts-c.err
    sync.sh wait $mode-fork-listening $T
    # through the port's uscmd, started by the library (the child's own connection to it)
    [ "$mode" = uscm ] && run=(env USCM_USCMD="$USCM_VM_BIN/tools/uscmd" "${run[@]}")
    "${run[@]}" "$B/gid_moved" -f "$IP" "$PEER" $((port + 30)) > /tmp/$mode-fork-c.out \
      2> /tmp/$mode-fork-c.err
  else
    "${run[@]}" "$B/reject" -s "$IP" "$port" > /tmp/$mode-reject-s.out 2> /tmp/$mode-reject-s.err &
    pid=$!
    wait_for /tmp/$mode-reject-s.out '^listening' && sync.sh signal $mode-reject-listening
    wait "$pid"
    "${run[@]}" "$B/ece" -s "$IP" $((port + 10)) > /tmp/$mode-ece-s.out 2> /tmp/$mode-ece-s.err &
    pid=$!
    wait_for /tmp/$mode-ece-s.out '^listening' && sync.sh signal $mode-ece-listening
    wait "$pid"
    "${run[@]}" "$B/device_facts" -s "$IP" $((port + 20)) > /tmp/$mode-facts-s.out \
      2> /tmp/$mode-facts-s.err &
    pid=$!
    wait_for /tmp/$mode-facts-s.out '^listening' && sync.sh signal $mode-facts-listening
    wait "$pid"
    "${run[@]}" "$B/gid_moved" -s "$IP" $((port + 30)) 2 0 1 > /tmp/$mode-fork-s.out \
      2> /tmp/$mode-fork-s.err &
    pid=$!
    wait_for /tmp/$mode-fork-s.out '^listening' && sync.sh signal $mode-fork-listening
    wait "$pid"
  fi
}
# same NAME FILE: the kernel's and uscm's outputs of FILE are the same lines
same() {
  if [ -s "/tmp/kernel-$2.out" ] && diff -q "/tmp/kernel-$2.out" "/tmp/uscm-$2.out" > /dev/null; then
    pass "$1"; printf '  = %s lines, last: %s\n' "$(wc -l < "/tmp/kernel-$2.out")" \
      "$(tail -n 1 "/tmp/kernel-$2.out")"
  else
    diff -u "/tmp/kernel-$2.out" "/tmp/uscm-$2.out" | sed 's/^/  | /' | head -n 60
    sed 's/^/  uscm stderr| /' "/tmp/uscm-$2.err" | tail -n 15
    fail "$1" "the kernel's and uscm's outputs differ (- kernel, + uscm)"
  fi
}

check kernel-cm-loaded grep -qw rdma_ucm /proc/modules
if [ "$USCM_VM_ROLE" = a ]; then check second-address second_address; fi
phase kernel 7600
check unload-kernel-cm modprobe -r rdma_ucm rdma_cm ib_cm
sync.sh signal unloaded-$USCM_VM_ROLE
sync.sh wait unloaded-$([ "$USCM_VM_ROLE" = a ] && echo b || echo a) $T
phase uscm 7601
if [ "$USCM_VM_ROLE" = a ]; then
  same mc_join-same mc_join
  same set_option-same set_option
  same port_bind-same port_bind
  same reject-client-same reject-c
  same ece-client-same ece-c
  same device_facts-client-same facts-c
  same fork-client-same fork-c
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  same reject-server-same reject-s
  same ece-server-same ece-s
  same device_facts-server-same facts-s
  same fork-server-same fork-s
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
