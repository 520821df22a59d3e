#!/usr/bin/env bash
# The drop-in's port addresses follow the kernel's in a long-lived process (issue 13;
# docs/API.md "What the kept GID table sees", "The port's addresses"): one VM (rxe0
# 192.168.77.1 <-veth-> rxe1 192.168.77.2), no ib_cm, rdma_cm, rdma_ucm (asserted),
# both ends through `uscm exec`. Client A (tests/vm/behaviour/gid_moved) connects from
# C = 192.168.77.2, the only address of veth1 when it and rxe1's uscmd start, to a server
# on rxe0 and echoes a message; then, while A waits, Z is added to veth1 and C is
# removed (veth1's only IPv4 address is then Z: promote_secondaries keeps the subnet).
# Checked, with the same uscmd running throughout (it started with A): a new process B
# connects from Z twice; A, started before Z existed, connects from Z and the message
# comes back (the kernel's rdma_bind_addr / rdma_resolve_addr find the netdev of Z at
# every call; a list read once answers EADDRNOTAVAIL), and A's rdma_bind_addr of the
# removed C is refused as on the kernel (EADDRNOTAVAIL, rdma_translate_ip finds no
# netdev). A's CM MADs leave from Z's GID: C's entry is empty, so a source GID kept
# from A's start would fail every send.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
# targets: //tests/vm/behaviour:gid_moved
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 400
. "$VM_DIR/dropin.sh"

S=192.168.77.1 C=192.168.77.2 Z=192.168.77.12 P=7400
B=$USCM_VM_BIN/tests/vm/behaviour
PORT1=/sys/class/infiniband/rxe1/ports/1

# has_gid IP: IP's IPv4-mapped GID is in rxe1's table
has_gid() {
  grep -qsx "$(ipv4_gid "$1")" "$PORT1"/gids/*
}
# until_gid yes|no IP: until rxe1's table has (no) GID for IP (roce_gid_mgmt changes it
# from a workqueue after the address event)
until_gid() {
  local end=$((SECONDS + T))
  while ((SECONDS < end)); do
    if has_gid "$2"; then [ "$1" = yes ] && return 0; else [ "$1" = no ] && return 0; fi
    sleep 0.1
  done
  echo "rxe1: GID of $2 present is not '$1' after ${T}s" >&2; return 1
}
uscmd_pid() { pgrep -f 'uscmd --ca rxe1 --port 1' | head -n 1; }

no_kernel_cm no-kernel-cm
"${USCM[@]}" "$B/gid_moved" -s $S $P 4 > /tmp/server.log 2>&1 & server=$!
check server-listening wait_for /tmp/server.log '^listening' $server
mkfifo /tmp/go
"${USCM[@]}" "$B/gid_moved" -c $C $S $P $Z < /tmp/go > /tmp/a.log 2>&1 & a=$!
exec 3> /tmp/go   # A's stdin: one line when the address has moved
check a-first-connection-echo wait_for /tmp/a.log '^connection 1: echo ok' $a
check a-waits wait_for /tmp/a.log '^moved\?' $a
BEFORE=$(uscmd_pid); check uscmd-runs test -n "$BEFORE"

if has_gid $Z; then fail z-not-there "rxe1 has a GID for $Z already"; else pass z-not-there; fi
check promote-secondaries sysctl -qw net.ipv4.conf.veth1.promote_secondaries=1
check add-z ip addr add $Z/24 dev veth1
check z-has-a-gid until_gid yes $Z
check remove-c ip addr del $C/24 dev veth1
check c-gone until_gid no $C
ip -4 addr show dev veth1 | sed -n 's/^ *inet /  = veth1 /p'

echo go | "${USCM[@]}" "$B/gid_moved" -c $Z $S $P > /tmp/b.log 2>&1 & b=$!
finish b-new-process-from-z $b /tmp/b.log
check b-echoes test "$(grep -c '^connection .: echo ok' /tmp/b.log)" = 2

echo go >&3
exec 3>&-
finish a-exit $a /tmp/a.log
sed 's/^/  | /' /tmp/a.log | grep -E 'connection|completion|bind|rdma_'
check a-second-connection-from-z-echo grep -q '^connection 2: echo ok' /tmp/a.log
check_output a-removed-source-refused 'bind first source: EADDRNOTAVAIL' cat /tmp/a.log
check same-uscmd test "$(uscmd_pid)" = "$BEFORE"
finish server-exit $server /tmp/server.log
group_end
