#!/usr/bin/env bash
# Debian's unmodified rping on uscm's drop-in librdmacm.so.1 at both ends (issue 13):
# two linked VMs, neither with ib_cm, rdma_cm, rdma_ucm (asserted), each program run
# through `uscm exec` (which starts uscmd for rxe0 on demand). uscm's CM talks to uscm's
# CM over the link: umad on QP1, addresses and path from the IPs (no SA).
#   1. rping -s -v on a  <-  rping -c -v -C 10 on b
#   2. rping -s -v on b  <-  rping -c -v -C 10 on a
# Checked: both ends exit 0, each prints its 10 data lines exactly (rping's pattern).
# Readiness: the server says "listening on" (USCM_DEBUG=1); sync.sh carries it over.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --timeout 400
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
N=10

# serve NAME PORT: rping -s on this VM's IP until one client has pinged N times
serve() {
  "${USCM[@]}" rping -s -a "$IP" -p "$2" -v > "/tmp/$1.log" 2>&1 & local pid=$!
  wait_for "/tmp/$1.log" 'listening on' && sync.sh signal "$1-ready"
  finish "$1-served" "$pid" "/tmp/$1.log"
  check_pings "$1-data" "/tmp/$1.log" 'server ping data: ' $N
}
# ping NAME PORT: rping -c -C N to the peer's server NAME
ping() {
  sync.sh wait "$1-ready" $T
  run_to "$1-client" "/tmp/$1-c.log" "${USCM[@]}" rping -c -a "$PEER" -I "$IP" -p "$2" -v -C $N
  check_pings "$1-client-data" "/tmp/$1-c.log" 'ping data: ' $N
  sync.sh signal "$1-client-done"
}

no_kernel_cm "no-kernel-cm-$USCM_VM_ROLE"
if [ "$USCM_VM_ROLE" = a ]; then
  serve uscm-server-a 7180
  ping uscm-server-b 7181
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  ping uscm-server-a 7180
  serve uscm-server-b 7181
  sync.sh wait uscm-server-b-client-done $T
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
