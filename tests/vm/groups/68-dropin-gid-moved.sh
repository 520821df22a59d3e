#!/usr/bin/env bash
# The drop-in's kept GID table follows the kernel's (issue 13; docs/API.md "What the
# kept table sees"): one VM (rxe0 192.168.77.1 <-veth-> rxe1 192.168.77.2), no ib_cm,
# rdma_cm, rdma_ucm (asserted), both ends through `uscm exec`. A client process
# (tests/vm/behaviour/gid_moved) connects from a second address X of veth1 to a server on
# rxe0 and echoes a message; then, while it waits, X is removed from veth1, an address Y
# is added first (it takes the index X's RoCE v2 GID had: checked, the premise), X is
# added back (at another index), and the same process connects again from X.
# Checked: the second QP's source GID index (ibv_query_qp) is the index that now holds
# X's RoCE v2 GID, and the message comes back. A table kept without following the
# kernel's changes gives the QP the old index, now Y's GID: the packets leave from Y, and
# rxe0 drops them (rxe_rcv check_addr: not the QP's peer address), so no echo.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
# targets: //tests/vm/behaviour:gid_moved
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 400
. "$VM_DIR/dropin.sh"

S=192.168.77.1 X=192.168.77.12 Y=192.168.77.13 P=7300
B=$USCM_VM_BIN/tests/vm/behaviour
PORT1=/sys/class/infiniband/rxe1/ports/1

# v2_index IP: the index of IP's RoCE v2 GID (IPv4-mapped) in rxe1's table, or nothing
v2_index() {
  local gid f i
  gid=$(ipv4_gid "$1")
  for f in $(grep -lx "$gid" "$PORT1"/gids/* 2>/dev/null); do
    i=${f##*/}
    grep -qs 'v2' "$PORT1/gid_attrs/types/$i" && { echo "$i"; return 0; }
  done
}
# until_index IP: until IP has a RoCE v2 GID on rxe1 (roce_gid_mgmt adds it from a
# workqueue after the address event); prints its index
until_index() {
  local i end=$((SECONDS + T))
  while ((SECONDS < end)); do
    i=$(v2_index "$1")
    [ -n "$i" ] && { echo "$i"; return 0; }
    sleep 0.1
  done
  echo "no RoCE v2 GID for $1 on rxe1 after ${T}s" >&2; return 1
}
# until_gone IP: until IP has no GID on rxe1
until_gone() {
  local end=$((SECONDS + T))
  while ((SECONDS < end)); do
    [ -z "$(v2_index "$1")" ] && return 0
    sleep 0.1
  done
  echo "$1 still has a GID on rxe1 after ${T}s" >&2; return 1
}
# same_index NAME GOT WANT
same_index() {
  if [ -n "$2" ] && [ "$2" = "$3" ]; then pass "$1"; echo "  = index $2"; else
    fail "$1" "index '$2', not '$3'"
  fi
}

no_kernel_cm no-kernel-cm
check add-x ip addr add $X/32 dev veth1
OLD=$(until_index $X); check x-has-a-gid test -n "$OLD"
"${USCM[@]}" "$B/gid_moved" -s $S $P > /tmp/server.log 2>&1 & server=$!
check server-listening wait_for /tmp/server.log '^listening' $server
mkfifo /tmp/go
"${USCM[@]}" "$B/gid_moved" -c $X $S $P < /tmp/go > /tmp/client.log 2>&1 & client=$!
exec 3> /tmp/go   # the client's stdin: one line when X has moved
check first-connection-echo wait_for /tmp/client.log '^connection 1: echo ok' $client
check client-waits wait_for /tmp/client.log '^moved\?' $client
grep '^connection 1: sgid_index' /tmp/client.log | sed 's/^/  = /'
same_index first-connection-from-x-index \
  "$(sed -n 's/^connection 1: sgid_index //p' /tmp/client.log)" "$OLD"

check remove-x ip addr del $X/32 dev veth1
check x-gone until_gone $X
check add-y ip addr add $Y/32 dev veth1
same_index y-took-x-index "$(until_index $Y)" "$OLD"
check add-x-again ip addr add $X/32 dev veth1
NEW=$(until_index $X)
check x-moved test -n "$NEW" -a "$NEW" != "$OLD"
echo "  = X: index $OLD, then $NEW; Y: index $(v2_index $Y)"

echo go >&3
exec 3>&-
finish client-exit $client /tmp/client.log
sed 's/^/  | /' /tmp/client.log | grep -E 'connection|completion'
same_index second-connection-sgid-is-x-new-index \
  "$(sed -n 's/^connection 2: sgid_index //p' /tmp/client.log)" "$NEW"
check second-connection-echo grep -q '^connection 2: echo ok' /tmp/client.log
finish server-exit $server /tmp/server.log
# how long each port's uscmd took to start (uscm exec waits while it makes progress)
grep -h 'after its fork' /tmp/uscmd-rxe*-1.log | sed 's/^/  = /'
group_end
