#!/usr/bin/env bash
# targets: //tests/vm:uscm_peer
# Multicast attach / detach of a real verbs UD QP (Soft-RoCE, one VM): uscm_peer --role
# mcast creates a UD QP on rxe0 (192.168.77.1) and one on rxe1 (192.168.77.2), joins
# 239.1.2.3's IP membership on rxe0's netdev (as the kernel's rdma_cm does for RoCE v2),
# and attaches / detaches the rxe0 QP through verbs::VerbsQp (the QpTransitioner the uscm
# runtime calls on MULTICAST_JOIN / leave). The uscm API's JoinMulticast itself needs an SA
# (MCMemberRecord), which RoCE does not have, so the join is not made through it here.
# A UD send from rxe1 to MGID ::ffff:239.1.2.3 (QPN 0xFFFFFF): not received before the
# attach, received byte for byte from the sender's QPN after it, not received after detach.
. "$(dirname "$0")/../lib.sh"
vm_boot

PEER=$USCM_VM_BIN/tests/vm/uscm_peer
T=${TMPDIR:-/tmp}/uscm-mcast; mkdir -p "$T"; rm -f "$T"/*
"$PEER" --role mcast --device rxe0 --ip 192.168.77.1 --peer-device rxe1 --peer-ip 192.168.77.2 \
  --group 239.1.2.3 --bytes 256 --timeout-ms 5000 > "$T/out" 2>&1
rc=$?
sed 's/^/  mcast| /' "$T/out"
expect() { # NAME REGEX
  if grep -Eq "$2" "$T/out"; then pass "$1"; else
    fail "$1" "no line /$2/; last: $(tail -n 1 "$T/out")"; fi
}
expect mcast-ud-qps '^ok ud-qps rx=rxe0 qpn=[0-9]+ tx=rxe1 qpn=[0-9]+ mgid=::ffff:239\.1\.2\.3$'
expect mcast-ip-membership '^ok ip-membership 239\.1\.2\.3 on 192\.168\.77\.1$'
expect mcast-not-received-before-attach '^ok before-attach not-received'
expect mcast-attach '^ok attached attaches=1$'
expect mcast-received-after-attach '^ok mcast-recv bytes=256 src_qp=[0-9]+ grh=1$'
expect mcast-detach '^ok detached detaches=1$'
expect mcast-not-received-after-detach '^ok after-detach not-received'
if [ "$rc" = 0 ]; then pass mcast-exit-0; else fail mcast-exit-0 "exit $rc"; fi
group_end
