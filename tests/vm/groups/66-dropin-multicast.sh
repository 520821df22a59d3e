#!/usr/bin/env bash
# Debian's unmodified mckey (rdmacm-utils) on uscm's drop-in librdmacm.so.1 against the
# kernel's rdma_cm, multicast on Soft-RoCE v2 (issue 13). Two linked VMs: a runs the
# kernel CM and the system's librdmacm; b has none of ib_cm, rdma_cm, rdma_ucm and runs
# mckey through `uscm exec` (drop-in first on the library path, uscmd started on
# demand). RoCE has no SA: a join derives the MGID ::ffff:<group> from the IP, the
# receiver's host joins the IP group on its netdev, its UD QP is attached to the MGID,
# and MULTICAST_JOIN's ah_attr / QPN 0xFFFFFF / Q_Key 0x01234567 address the group.
#   1. drop-in receiver (b)   <- kernel sender (a)      mckey -m 239.1.2.3
#   2. kernel receiver (a)    <- drop-in sender (b)     mckey -m 239.1.2.4
#   3. kernel receiver (a)    <- drop-in send-only sender (b, -o: SENDONLY_FULLMEMBER)
# A receiver runs `mckey -C 10`: it exits 0 only after exactly 10 receive completions
# (poll_cqs counts them), so the received count is the check; the sender starts once
# the receiver printed its join (sync.sh), since UD sends before the attach are lost.
# mckey does not flush stdout: it runs under `stdbuf -oL` so that its join line is seen.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscm //tools:uscmd
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400

IP=$USCM_VM_IP
T=120   # seconds for any one step: TCG guests on a loaded 2-core host are slow
N=10
DROPIN=(env USCM_DEBUG=1 timeout $T "$USCM_VM_BIN/tools/uscm" exec -- stdbuf -oL)

# finish NAME PID LOG: PASS when the background receiver exits 0 after N receives
finish() {
  local rc=0
  wait "$2" || rc=$?
  if [ "$rc" = 0 ] && grep -q '^data transfers complete' "$3"; then
    pass "$1"; printf '  = %s\n' "$(grep -m1 'joined dgid' "$3")"
  else
    sed 's/^/  | /' "$3" | tail -n 30
    fail "$1" "exit $rc (timeout 124: fewer than $N messages received)"
  fi
}
# send NAME LOG ARGS...: a sender run in the foreground; PASS when it sent N and exits 0
send() {
  local name=$1 log=$2 rc=0; shift 2
  "$@" > "$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ] && grep -q '^data transfers complete' "$log"; then pass "$name"; else
    sed 's/^/  | /' "$log" | tail -n 30; fail "$name" "exit $rc"; fi
}

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules
  # 1. kernel sender to the drop-in's receiver
  sync.sh wait dropin-receiver-joined $T
  send kernel-mckey-sender /tmp/mckey-s1.log timeout $T stdbuf -oL mckey -m 239.1.2.3 -b "$IP" -s -C $N
  # 2. and 3. kernel receiver, drop-in sender (full member, then send-only)
  for g in 4 5; do
    timeout $T stdbuf -oL mckey -m 239.1.2.$g -b "$IP" -C $N > /tmp/mckey-r$g.log 2>&1 & pid=$!
    wait_for /tmp/mckey-r$g.log 'joined dgid' && sync.sh signal kernel-receiver-joined-$g
    finish kernel-mckey-receiver-$g "$pid" /tmp/mckey-r$g.log
  done
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  check no-kernel-cm-b bash -c '! lsmod | grep -Ewq "^(ib_cm|rdma_cm|rdma_ucm)"'
  # 1.
  NETDEV=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1)
  "${DROPIN[@]}" mckey -m 239.1.2.3 -b "$IP" -C $N > /tmp/dropin-r.log 2>&1 & pid=$!
  wait_for /tmp/dropin-r.log 'joined dgid'
  check_output dropin-join-event 'joined dgid: ::ffff:239\.1\.2\.3 mlid 0x0 sl 0' cat /tmp/dropin-r.log
  # the host joined the IP group on the netdev (IGMP), as the kernel's cma_igmp_send
  check_output dropin-ip-group-on-netdev 'inet +239\.1\.2\.3' ip maddr show dev "$NETDEV"
  sync.sh signal dropin-receiver-joined
  finish dropin-mckey-receiver "$pid" /tmp/dropin-r.log
  # mckey left the group and exited: the membership went with the join
  check dropin-ip-group-left bash -c "! ip maddr show dev $NETDEV | grep -Eq 'inet +239\.1\.2\.3'"
  # 2.
  sync.sh wait kernel-receiver-joined-4 $T
  send dropin-mckey-sender /tmp/dropin-s4.log "${DROPIN[@]}" mckey -m 239.1.2.4 -b "$IP" -s -C $N
  # 3.
  sync.sh wait kernel-receiver-joined-5 $T
  send dropin-mckey-sendonly-sender /tmp/dropin-s5.log \
    "${DROPIN[@]}" mckey -m 239.1.2.5 -b "$IP" -s -o -C $N
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
