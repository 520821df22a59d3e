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
#      the kernel does (other_netdev below)
# Checks per step and way: the exit status, every ping's data line (check_pings), and
# on b that the drop-in's traffic went out on the right netdev: eth0.100's tx_packets
# grew by at least the ping count in steps 1 and 2 and by less in step 3. Readiness:
# both GID entries of the VLAN in rxe0's table; the kernel listener in `rdma resource
# show cm_id`; the drop-in says "listening on" (USCM_DEBUG=1).
# targets: //tools:uscm //tools:uscmd //api/librdmacm:librdmacm.so.1
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 1200
. "$(dirname "$0")/../dropin.sh"   # USCM, kernel_rping_side, check_pings, finish, run_to, wait_for, ipv4_gid

N=10
NETDEV=$(ip -o -4 addr show | awk -v ip="$USCM_VM_IP" 'index($4, ip "/") == 1 { print $2 }')
VLAN=$NETDEV.100
if [ "$USCM_VM_ROLE" = a ]; then me=1 other=2 peer_role=b; else me=2 other=1 peer_role=a; fi
LL=$(ip -o -6 addr show dev "$NETDEV" scope link | awk '{ sub("/.*", "", $4); print $4; exit }')
# the link-local GID as sysfs prints it: rxe's GID 0, the base netdev's
LL_GID=$(cat /sys/class/infiniband/rxe0/ports/1/gids/0)

# vlan_up: VLAN 100 with 192.168.100.$me (and its link-local address, no DAD), then
# until rxe0's table has the VLAN's IPv4 GID and the link-local GID of eth0.100 (the
# kernel's roce_gid_mgmt adds them from a workqueue)
vlan_up() {
  local end=$((SECONDS + T)) f
  modprobe 8021q && ip link add link "$NETDEV" name "$VLAN" type vlan id 100 || return 1
  echo 0 > "/proc/sys/net/ipv6/conf/$VLAN/accept_dad"
  ip link set "$VLAN" up && ip addr add "192.168.100.$me/24" dev "$VLAN" || return 1
  local v4 port=/sys/class/infiniband/rxe0/ports/1
  v4=$(ipv4_gid "192.168.100.$me")
  while ((SECONDS < end)); do
    local have_v4=0 have_ll=0
    # the few entries with either GID (one grep: rxe's table has 1,024 files)
    for f in $(grep -lx -e "$v4" -e "$LL_GID" "$port"/gids/*); do
      [ "$(cat "$port/gid_attrs/ndevs/${f##*/}" 2>/dev/null)" = "$VLAN" ] || continue
      case $(cat "$f") in "$v4") have_v4=1 ;; "$LL_GID") have_ll=1 ;; esac
    done
    [ "$have_v4$have_ll" = 11 ] && return 0
    sleep 0.1
  done
  echo "rxe0 has no entries of $VLAN ($v4, $LL_GID) after ${T}s" >&2; return 1
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

# step NAME HERE PEER PORT VLAN?: a's kernel server for b's drop-in client on PORT, then
# b's drop-in server for a's kernel client on PORT+1 (a's half: dropin.sh kernel_rping_side)
step() {
  local name=$1 here=$2 peer=$3 port=$4 vlan=$5 pid before
  if [ "$USCM_VM_ROLE" = a ]; then
    kernel_rping_side "$name" "$here" "$peer" "$port"
  else
    sync.sh wait "kernel-$name-server-ready" $T
    before=$(vlan_tx)
    run_to "dropin-$name-rping-c-to-kernel" "/tmp/$name-c.log" \
      "${USCM[@]}" rping -c -a "$peer" -p "$port" -v -C $N
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

# other_netdev: 4. a listener bound to the link-local address on the base netdev
# ("fe80::...%eth0") and a client's connect to that address on the VLAN
# ("fe80::...%eth0.100"): the REQ comes in on the VLAN's GID entry, and the kernel's
# rdma_cm takes it for no listener bound to another netdev (cma_match_net_dev): its
# ib_cm answers REJ 28 (rping: "cma event RDMA_CM_EVENT_REJECTED, error 28"), the
# listener sees nothing. First a's kernel listener for b's drop-in client (what a client
# sees), then b's drop-in listener for a's kernel client, which must see the same (before
# 2026-11-28 the drop-in's listener took it). Each listener is still listening after.
other_netdev() {
  local pid saw want='cma event RDMA_CM_EVENT_REJECTED, error 28'
  if [ "$USCM_VM_ROLE" = a ]; then
    timeout $T rping -s -a "$LL%$NETDEV" -p 7196 -v > /tmp/scope-s.log 2>&1 & pid=$!
    kernel_listening 7196 && sync.sh signal kernel-scope-server-ready
    sync.sh wait dropin-scope-client-done $T
    still_listening kernel-scope-listener-took-nothing "$pid" /tmp/scope-s.log
    saw=$(sync.sh get dropin-scope-client-saw $T)
    sync.sh wait dropin-scope-server-ready $T
    timeout $T rping -c -a "$PEER_LL%$VLAN" -p 7197 -v -C 1 > /tmp/scope-c.log 2>&1
    rejected kernel-scope-client-sees-what-dropin-client-saw /tmp/scope-c.log "$saw"
    sync.sh signal kernel-scope-client-done
  else
    sync.sh wait kernel-scope-server-ready $T
    "${USCM[@]}" rping -c -a "$PEER_LL%$VLAN" -p 7196 -v -C 1 > /tmp/scope-c.log 2>&1
    rejected dropin-scope-client-rejected-by-kernel /tmp/scope-c.log "$want"
    grep -m1 '^cma event ' /tmp/scope-c.log | sync.sh put dropin-scope-client-saw
    sync.sh signal dropin-scope-client-done
    "${USCM[@]}" rping -s -a "$LL%$NETDEV" -p 7197 -v > /tmp/scope-s.log 2>&1 & pid=$!
    wait_for /tmp/scope-s.log 'listening on' "$pid" && sync.sh signal dropin-scope-server-ready
    sync.sh wait kernel-scope-client-done $T
    still_listening dropin-scope-listener-took-nothing "$pid" /tmp/scope-s.log
  fi
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
if [ "$USCM_VM_ROLE" = a ]; then
  # b checks this too: a's console lines can be lost, b's FAIL is not
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
