#!/usr/bin/env bash
# Debian's unmodified rping over a VLAN on the rxe's netdev (issue 13), through `uscm
# exec` (the drop-in librdmacm.so.1 and the port's uscmd) on b against the kernel's
# rdma_cm on a, both ways: each VM adds VLAN 100 on its rxe netdev (eth0.100 on eth0),
# and rxe's GID table gets the VLAN's addresses, each in an entry of eth0.100 (the
# netdev in gid_attrs/ndevs), the link-local fe80:: of their one MAC in two entries
# (eth0's and eth0.100's). rxe sends on an entry's netdev: the VLAN's frames are tagged.
#   1. the VLAN's IPv4 (192.168.100.1, .2): the drop-in's REQ leaves from the VLAN's
#      entry (before 2026-11-28: from eth0's IPv4 entry, untagged; the kernel never
#      answered, UNREACHABLE)
#   2. the VLAN's link-local address, "fe80::...%eth0.100": the scope names the entry
#      (before: eth0's, the first; the kernel's listener on eth0.100 rejected the REQ,
#      reason 28, and the drop-in's server sent its data untagged)
#   3. the same address on the base netdev, "fe80::...%eth0": eth0's entry
#   4. a listener on "fe80::...%eth0", a connect to "fe80::...%eth0.100": refused as
#      the kernel does (cma_match_net_dev; refused_both_ways below)
#   5. a client bound to 192.168.100.(10+N)/32 on eth0 (untagged) to the peer's eth0
#      address: the peer's route back to it leaves on eth0.100, not on eth0 where the
#      REQ came in, so it is refused as the kernel does (validate_net_dev)
#   6. one address on two netdevs (10.77.0.N on eth0, then on eth0.100): an unbound
#      id sends from the entry of the route's netdev, an accepted one from the entry
#      its REQ came in on (two_netdevs below)
#   7. the same with each client bound to 10.77.0.N (rping -I): the entry of the
#      netdev the address was added to last (eth0.100), as the kernel's rdma_bind_addr
#   8. one IPv6 address on two netdevs (fd00:77::N on eth0.100, then on eth0), each
#      client bound to it: the entry of the first netdev in the kernel's list that has
#      it (eth0), as the kernel's rdma_bind_addr (two_netdevs_v6 below)
# Checks per step and way: the exit status, every ping's data line (check_pings), and
# on b that the drop-in's traffic went out on the right netdev: eth0.100's tx_packets
# grew by at least the ping count in steps 1, 2, 6 and 7 and by less in steps 3 and 8.
# Readiness: both GID entries of the VLAN in rxe0's table; the kernel listener in `rdma resource
# show cm_id`; the drop-in says "listening on" (USCM_DEBUG=1).
# targets: //tools:uscm //tools:uscmd //api/librdmacm:librdmacm.so.1
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 1800
. "$(dirname "$0")/../dropin.sh"   # USCM, kernel_rping_side, check_pings, finish, run_to, wait_for, ipv4_gid

N=10
NETDEV=$(ip -o -4 addr show | awk -v ip="$USCM_VM_IP" 'index($4, ip "/") == 1 { print $2 }')
VLAN=$NETDEV.100
if [ "$USCM_VM_ROLE" = a ]; then me=1 other=2 peer_role=b; else me=2 other=1 peer_role=a; fi
LL=$(ip -o -6 addr show dev "$NETDEV" scope link | awk '{ sub("/.*", "", $4); print $4; exit }')
# the link-local GID as sysfs prints it: rxe's GID 0, the base netdev's
LL_GID=$(cat /sys/class/infiniband/rxe0/ports/1/gids/0)

# has_entry NETDEV GID: rxe0's table has GID in an entry of NETDEV (one grep: rxe's
# table has 1,024 files)
has_entry() {
  local f port=/sys/class/infiniband/rxe0/ports/1
  for f in $(grep -lx -e "$2" "$port"/gids/*); do
    [ "$(cat "$port/gid_attrs/ndevs/${f##*/}" 2>/dev/null)" = "$1" ] && return 0
  done
  return 1
}
# wait_entries NETDEV GID...: until rxe0 has each GID in an entry of NETDEV (the
# kernel's roce_gid_mgmt adds them from a workqueue)
wait_entries() {
  local end=$((SECONDS + T)) dev=$1 g missing; shift
  while ((SECONDS < end)); do
    missing=""
    for g in "$@"; do has_entry "$dev" "$g" || missing="$missing $g"; done
    [ -z "$missing" ] && return 0
    sleep 0.1
  done
  echo "rxe0 has no entries of $dev for$missing after ${T}s" >&2; return 1
}

# vlan_up: VLAN 100 with 192.168.100.$me (and its link-local address, no DAD), then
# until rxe0's table has the VLAN's IPv4 GID and the link-local GID of eth0.100
vlan_up() {
  modprobe 8021q && ip link add link "$NETDEV" name "$VLAN" type vlan id 100 || return 1
  echo 0 > "/proc/sys/net/ipv6/conf/$VLAN/accept_dad"
  ip link set "$VLAN" up && ip addr add "192.168.100.$me/24" dev "$VLAN" || return 1
  wait_entries "$VLAN" "$(ipv4_gid "192.168.100.$me")" "$LL_GID"
}

vlan_tx() { cat "/sys/class/net/$VLAN/statistics/tx_packets"; }
# on_vlan NAME BEFORE WANT: PASS when eth0.100 sent at least N packets since BEFORE
# (WANT=yes) or fewer (WANT=no)
on_vlan() {
  local sent=$(($(vlan_tx) - $2))
  if { [ "$3" = yes ] && ((sent >= N)); } || { [ "$3" = no ] && ((sent < N)); }; then
    pass "$1"; echo "  = $sent packets on $VLAN"
  else
    fail "$1" "$sent packets on $VLAN (want $([ "$3" = yes ] && echo ">=" || echo "<") $N)"
  fi
}

# step NAME HERE PEER PORT VLAN? [BOUND]: a's kernel server for b's drop-in client on
# PORT, then b's drop-in server for a's kernel client on PORT+1 (a's half: dropin.sh
# kernel_rping_side); BOUND=bound: each client binds to HERE (rping -I)
step() {
  local name=$1 here=$2 peer=$3 port=$4 vlan=$5 pid before bind=()
  [ "${6:-}" = bound ] && bind=(-I "$here")
  if [ "$USCM_VM_ROLE" = a ]; then
    kernel_rping_side "$name" "$here" "$peer" "$port" "${bind[@]}"
  else
    sync.sh wait "kernel-$name-server-ready" $T
    before=$(vlan_tx)
    run_to "dropin-$name-rping-c-to-kernel" "/tmp/$name-c.log" \
      "${USCM[@]}" rping -c "${bind[@]}" -a "$peer" -p "$port" -v -C $N
    check_pings "dropin-$name-client-data" "/tmp/$name-c.log" 'ping data: ' $N
    on_vlan "dropin-$name-client-on-vlan-$vlan" "$before" "$vlan"
    before=$(vlan_tx)
    "${USCM[@]}" rping -s -a "$here" -p $((port + 1)) -v > "/tmp/$name-s.log" 2>&1 & pid=$!
    wait_for "/tmp/$name-s.log" 'listening on' "$pid" && sync.sh signal "dropin-$name-server-ready"
    finish "dropin-$name-rping-s-served-kernel" "$pid" "/tmp/$name-s.log"
    check_pings "dropin-$name-server-data" "/tmp/$name-s.log" 'server ping data: ' $N
    on_vlan "dropin-$name-server-on-vlan-$vlan" "$before" "$vlan"
    sync.sh wait "kernel-$name-client-done" $T
  fi
}

# still_listening NAME PID LOG: PASS while the server PID runs (it took no connection:
# rping -s exits after its one client), then stops it
still_listening() {
  if kill -0 "$2" 2>/dev/null; then pass "$1"; else show "$3"; fail "$1" "it exited"; fi
  kill "$2" 2>/dev/null; wait "$2" 2>/dev/null
}
# rejected NAME LOG WANT: PASS when the client's LOG has the line WANT ("cma event ...")
rejected() {
  local got; got=$(grep -m1 '^cma event ' "$2")
  if [ "$got" = "$3" ]; then pass "$1"; echo "  = $got"; else
    show "$2"; fail "$1" "'$got', not '$3'"
  fi
}

# refused_both_ways NAME PORT LISTEN CLIENT_ARGS...: a request the kernel's rdma_cm
# refuses before any listener takes it: its ib_cm answers REJ 28 (rping: "cma event
# RDMA_CM_EVENT_REJECTED, error 28"), the listener sees nothing. First a's kernel
# listener on LISTEN:PORT for b's drop-in client (rping -c CLIENT_ARGS -p PORT: what a
# client sees), then b's drop-in listener on LISTEN:PORT+1 for a's kernel client, which
# must see the same. Each listener still listens after (rping -s exits after a client).
refused_both_ways() {
  local name=$1 port=$2 listen=$3 pid saw want='cma event RDMA_CM_EVENT_REJECTED, error 28'
  shift 3
  if [ "$USCM_VM_ROLE" = a ]; then
    timeout $T rping -s -a "$listen" -p "$port" -v > "/tmp/$name-s.log" 2>&1 & pid=$!
    kernel_listening "$port" && sync.sh signal "kernel-$name-server-ready"
    sync.sh wait "dropin-$name-client-done" $T
    still_listening "kernel-$name-listener-took-nothing" "$pid" "/tmp/$name-s.log"
    saw=$(sync.sh get "dropin-$name-client-saw" $T)
    sync.sh wait "dropin-$name-server-ready" $T
    timeout $T rping -c "$@" -p $((port + 1)) -v -C 1 > "/tmp/$name-c.log" 2>&1
    rejected "kernel-$name-client-sees-what-dropin-client-saw" "/tmp/$name-c.log" "$saw"
    sync.sh signal "kernel-$name-client-done"
  else
    sync.sh wait "kernel-$name-server-ready" $T
    "${USCM[@]}" rping -c "$@" -p "$port" -v -C 1 > "/tmp/$name-c.log" 2>&1
    rejected "dropin-$name-client-rejected-by-kernel" "/tmp/$name-c.log" "$want"
    grep -m1 '^cma event ' "/tmp/$name-c.log" | sync.sh put "dropin-$name-client-saw"
    sync.sh signal "dropin-$name-client-done"
    "${USCM[@]}" rping -s -a "$listen" -p $((port + 1)) -v > "/tmp/$name-s.log" 2>&1 & pid=$!
    wait_for "/tmp/$name-s.log" 'listening on' "$pid" && sync.sh signal "dropin-$name-server-ready"
    sync.sh wait "kernel-$name-client-done" $T
    still_listening "dropin-$name-listener-took-nothing" "$pid" "/tmp/$name-s.log"
  fi
}

# 4. a listener bound to the link-local address on the base netdev ("fe80::...%eth0")
# and a client's connect to that address on the VLAN ("fe80::...%eth0.100"): the REQ
# comes in on the VLAN's GID entry, and the kernel's rdma_cm takes it for no listener
# bound to another netdev (cma_match_net_dev). Before 2026-11-28 the drop-in's listener
# took it.
other_netdev() { refused_both_ways scope 7196 "$LL%$NETDEV" -a "$PEER_LL%$VLAN"; }

# 5. the kernel's validate_net_dev (cma_ib_id_from_event, before cma_find_listener): a
# REQ is refused unless the route back to its source, from its destination and asked on
# the netdev of the GID entry it came in on, leaves on that netdev. Each VM puts
# 192.168.100.(10+N)/32 on eth0 (untagged; its GID in an entry of eth0) and its client
# binds to it (rping -I) to reach the peer's eth0 address: the REQ comes in on the
# peer's eth0 entry, and the peer routes 192.168.100.0/24 on eth0.100 only (no default
# route in the VMs): -EHOSTUNREACH, REJ 28. Before 2026-11-28 the drop-in's listener
# took it and the ping went through (its REP went out on eth0 all the same).
route_back() {
  local stray=192.168.100.$((10 + me))
  check "stray-address-$USCM_VM_ROLE" ip addr add "$stray/32" dev "$NETDEV" &&
    check "stray-entry-$USCM_VM_ROLE" wait_entries "$NETDEV" "$(ipv4_gid "$stray")"
  sync.sh signal "$USCM_VM_ROLE-stray-ready"
  sync.sh wait "$peer_role-stray-ready" $T
  refused_both_ways back 7198 "$USCM_VM_IP" -I "$stray" -a "$USCM_VM_PEER_IP"
  ip addr del "$stray/32" dev "$NETDEV"
}

# first_entry_on NETDEV GID: rxe0's lowest-numbered entry of GID is NETDEV's
first_entry_on() {
  local port=/sys/class/infiniband/rxe0/ports/1 f
  f=$(grep -lx -e "$2" "$port"/gids/* | sed 's|.*/||' | sort -n | head -n1)
  echo "entry $f: $(cat "$port/gid_attrs/ndevs/$f" 2>/dev/null)"
  [ -n "$f" ] && [ "$(cat "$port/gid_attrs/ndevs/$f")" = "$1" ]
}

# 6. one global address on two netdevs: 10.77.0.N first as /32 on eth0, then as /24 on
# eth0.100, so rxe0's first entry of it is eth0's (checked) while the route to the
# peer's 10.77.0.x leaves on eth0.100. The kernel's rdma_cm sends an unbound id's REQ
# from the entry of the route's netdev (rdma_resolve_ip's bound_dev_if), and a new id
# from the entry its REQ came in on; so must the drop-in: rping both ways, the
# drop-in's traffic on eth0.100. Before 2026-11-28 it took the first entry (eth0's,
# untagged): the kernel refused its REQ (validate_net_dev: the peer routes 10.77.0.0/24
# on eth0.100 only) and its server answered untagged.
two_netdevs() {
  local ip=10.77.0.$me gid
  gid=$(ipv4_gid "$ip")
  check "two-netdevs-base-$USCM_VM_ROLE" ip addr add "$ip/32" dev "$NETDEV" &&
    check "two-netdevs-base-entry-$USCM_VM_ROLE" wait_entries "$NETDEV" "$gid" &&
    check "two-netdevs-vlan-$USCM_VM_ROLE" ip addr add "$ip/24" dev "$VLAN" &&
    check "two-netdevs-vlan-entry-$USCM_VM_ROLE" wait_entries "$VLAN" "$gid" &&
    check "two-netdevs-first-entry-is-base-$USCM_VM_ROLE" first_entry_on "$NETDEV" "$gid" &&
    echo "  = $OUT"
  sync.sh signal "$USCM_VM_ROLE-two-netdevs-ready"
  sync.sh wait "$peer_role-two-netdevs-ready" $T
  step two-netdevs "$ip" "10.77.0.$other" 7200 yes
  # 7. the same, each client bound to its 10.77.0.N (rping -I): the kernel's
  # rdma_bind_addr takes the netdev the address was added to last (__ip_dev_find:
  # eth0.100), whatever the route; so must the drop-in. Before 2026-11-28 it took the
  # first entry (eth0's, untagged) and the kernel refused its REQ (validate_net_dev).
  step two-netdevs-bound "$ip" "10.77.0.$other" 7202 yes bound
}

# 8. one IPv6 address on two netdevs: fd00:77::N/64 first on eth0.100, then on eth0 (no
# DAD), so rxe0's first entry of it is eth0.100's (checked), each client bound to it
# (rping -I). The kernel's rdma_bind_addr takes the first netdev in its list that has
# the address (rdma_translate_ip: for_each_netdev_rcu, ipv6_chk_addr), eth0, registered
# before eth0.100, whichever it was added to last; so must the drop-in: its traffic
# untagged. Before 2026-11-28 it took the address's first entry (eth0.100's, tagged).
two_netdevs_v6() {
  local ip=fd00:77::$me gid
  gid=$(printf 'fd00:0077:0000:0000:0000:0000:0000:%04x\n' "$me")
  check "v6-two-netdevs-vlan-$USCM_VM_ROLE" ip -6 addr add "$ip/64" dev "$VLAN" nodad &&
    check "v6-two-netdevs-vlan-entry-$USCM_VM_ROLE" wait_entries "$VLAN" "$gid" &&
    check "v6-two-netdevs-base-$USCM_VM_ROLE" ip -6 addr add "$ip/64" dev "$NETDEV" nodad &&
    check "v6-two-netdevs-base-entry-$USCM_VM_ROLE" wait_entries "$NETDEV" "$gid" &&
    check "v6-two-netdevs-first-entry-is-vlan-$USCM_VM_ROLE" first_entry_on "$VLAN" "$gid" &&
    echo "  = $OUT"
  sync.sh signal "$USCM_VM_ROLE-v6-two-netdevs-ready"
  sync.sh wait "$peer_role-v6-two-netdevs-ready" $T
  step v6-two-netdevs-bound "$ip" "fd00:77::$other" 7204 no bound
}

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules
else
  no_kernel_cm no-kernel-cm-b
fi
check "vlan-gids-$USCM_VM_ROLE" vlan_up && sync.sh signal "$USCM_VM_ROLE-vlan-ready"
echo "$LL" | sync.sh put "$USCM_VM_ROLE-link-local"
PEER_LL=$(sync.sh get "$peer_role-link-local" $T)
sync.sh wait "$peer_role-vlan-ready" $T
step v4 "192.168.100.$me" "192.168.100.$other" 7190 yes
step ll-vlan "$LL%$VLAN" "$PEER_LL%$VLAN" 7192 yes
step ll-base "$LL%$NETDEV" "$PEER_LL%$NETDEV" 7194 no
other_netdev
route_back
two_netdevs
two_netdevs_v6
if [ "$USCM_VM_ROLE" = a ]; then
  # b checks this too: a's console lines can be lost, b's FAIL is not
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
