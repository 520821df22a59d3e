#!/usr/bin/env bash
# Two of Debian's unmodified rdma_cm programs at once on one port, on uscm's drop-in
# librdmacm.so.1 (issue 13): one VM (rxe0 192.168.77.1 <-veth-> rxe1 192.168.77.2) with
# no ib_cm, rdma_cm, rdma_ucm (asserted). rping's and ucmatose's servers both on rxe0,
# their clients both on rxe1, all four through `uscm exec` and no uscmd started by
# hand: the first `uscm exec` on a port starts its uscmd, and the second program on that
# port goes through it too (without it the second would find the CM class taken).
# The drop-in picks the port per id from its address, as librdmacm: the clients bind
# rxe1's IP (rping -I, ucmatose -b) and name no device. A third program, ucmatose's
# server on 0.0.0.0 (-c 2), listens on both ports and is reached through each: one
# client from rxe1 to rxe0's IP, one from rxe0 to rxe1's.
# Checked: all seven exit 0, rping's 10 data lines byte for byte on both ends,
# ucmatose's "data transfers complete" / "return status 0" on every end, and each
# port's uscmd (started by uscm exec) served four programs: the two specific servers
# opened rxe0 only, the two specific clients rxe1 only (a port is opened on first use),
# the wildcard server both, each wildcard client the port of its own address.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 400
. "$VM_DIR/dropin.sh"

S=192.168.77.1 C=192.168.77.2 N=10

no_kernel_cm no-kernel-cm
# One program after the other is ready: the first `uscm exec` on a port starts its
# uscmd, the second finds it answering (two started at the same instant would both
# try to start one).
"${USCM[@]}" rping -s -a $S -p 7190 -v > /tmp/rping-s.log 2>&1 & rping_s=$!
wait_for /tmp/rping-s.log 'listening on'
"${USCM[@]}" ucmatose -b $S -p 7191 > /tmp/ucmatose-s.log 2>&1 & ucmatose_s=$!
wait_for /tmp/ucmatose-s.log 'listening on'
"${USCM[@]}" ucmatose -b 0.0.0.0 -p 7192 -c 2 > /tmp/wild-s.log 2>&1 & wild_s=$!
wait_for /tmp/wild-s.log 'listening on 0.0.0.0 port 7192 \(every port\)'
"${USCM[@]}" rping -c -a $S -I $C -p 7190 -v -C $N > /tmp/rping-c.log 2>&1 & rping_c=$!
wait_for /tmp/uscmd-rxe1-1.log '^uscmd: rxe1 port 1'
"${USCM[@]}" ucmatose -s $S -b $C -p 7191 > /tmp/ucmatose-c.log 2>&1 & ucmatose_c=$!
# the wildcard listener through rxe0's IP (from rxe1) and through rxe1's (from rxe0)
"${USCM[@]}" ucmatose -s $S -b $C -p 7192 -c 1 > /tmp/wild-c0.log 2>&1 & wild_c0=$!
"${USCM[@]}" ucmatose -s $C -b $S -p 7192 -c 1 > /tmp/wild-c1.log 2>&1 & wild_c1=$!

finish rping-client-on-rxe1 $rping_c /tmp/rping-c.log
finish ucmatose-client-on-rxe1 $ucmatose_c /tmp/ucmatose-c.log
finish_rping_server rping-server-on-rxe0 $rping_s /tmp/rping-s.log
finish ucmatose-server-on-rxe0 $ucmatose_s /tmp/ucmatose-s.log
finish wildcard-client-to-rxe0-ip $wild_c0 /tmp/wild-c0.log
finish wildcard-client-to-rxe1-ip $wild_c1 /tmp/wild-c1.log
finish wildcard-server $wild_s /tmp/wild-s.log
check_pings rping-client-data /tmp/rping-c.log 'ping data: ' $N
check_pings rping-server-data /tmp/rping-s.log 'server ping data: ' $N
for side in s c wild-s wild-c0 wild-c1; do
  log=/tmp/ucmatose-$side.log; [ -e "$log" ] || log=/tmp/$side.log
  has_lines "ucmatose-$side-data" "$log" '^data transfers complete$' 1
  has_lines "ucmatose-$side-status" "$log" '^return status 0$' 1
done
# uscm exec started one uscmd per port; each served four programs (uscmd prints its
# counts when it stops): a program opened only the ports its addresses are on
for dev in rxe0 rxe1; do
  pid=$(pgrep -f "uscmd --ca $dev --port 1") && kill $pid
  for ((i = 0; i < T * 10; i++)); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  check_output "uscmd-$dev-served-four" 'clients 4 accepted, 0 refused' cat /tmp/uscmd-$dev-1.log
done
group_end
