#!/usr/bin/env bash
# Debian's unmodified rping over IPv6 on uscm's drop-in librdmacm.so.1 (issue 13), over
# Soft-RoCE: two linked VMs, a with the kernel CM and the system's librdmacm, b with none
# of them loaded and rping run with LD_LIBRARY_PATH=<bazel-bin>/api/librdmacm (no uscm
# exec: the library starts the port's uscmd itself). Each step both directions: the
# drop-in's client against the kernel's server, then the kernel's client against the
# drop-in's server (docs/API.md "On RoCE").
#   1. global IPv6 addresses (RoCE v2 with IPv6 GIDs: fd00:78::1 on a, fd00:78::2 on b,
#      /64 on the link, no DAD): the drop-in finds the IPv6 GID's index and the peer's
#      MAC by neighbour discovery. Readiness: each side's GID table shows its address
#      before the other is told. (In 60-dropin-rping until 2026-11-27.)
#   2. link-local addresses: the netdev's own fe80:: address (rxe's GID 0), given as
#      getaddrinfo takes it, "fe80::...%eth0" (sin6_scope_id): as the kernel's rdma_cm,
#      the drop-in binds one only with its interface (cma_check_linklocal), sends to a
#      link-local destination from it, and asks the route on that interface. Each VM
#      tells the other its address as `ip -6 addr` shows it.
# Every ping's data line is checked byte for byte (dropin.sh check_pings). Readiness: the
# kernel listener shows in `rdma resource show cm_id`; the drop-in says "listening on"
# with USCM_DEBUG=1.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400
. "$(dirname "$0")/../dropin.sh"   # kernel_rping_side, check_pings, finish, run_to, wait_for

LIB=$USCM_VM_BIN/api/librdmacm
IP=$USCM_VM_IP
T=120   # seconds for any one step: TCG guests on a loaded 2-core host are slow
N=10
DROPIN=(env LD_LIBRARY_PATH="$LIB" USCM_DEBUG=1 timeout $T)
NETDEV=$(ip -o -4 addr show | awk -v ip="$IP" 'index($4, ip "/") == 1 { print $2 }')

# 1.: the IPv6 addresses and their GIDs as sysfs prints them
if [ "$USCM_VM_ROLE" = a ]; then IP6=fd00:78::1 PEER6=fd00:78::2; else IP6=fd00:78::2 PEER6=fd00:78::1; fi
GID6=fd00:0078:0000:0000:0000:0000:0000:000${IP6##*:}
# ipv6_address: IP6/64 on the link's netdev, then until rxe0's GID table has it
# (roce_gid_mgmt adds it from a workqueue)
ipv6_address() {
  local end=$((SECONDS + T))
  ip -6 addr add "$IP6/64" dev "$NETDEV" nodad || return 1
  while ((SECONDS < end)); do
    grep -qsx "$GID6" /sys/class/infiniband/rxe0/ports/1/gids/* && return 0
    sleep 0.1
  done
  echo "no GID $GID6 on rxe0 after ${T}s" >&2; return 1
}
# 2.: the netdev's link-local address, without and with its interface
LL=$(ip -o -6 addr show dev "$NETDEV" scope link | awk '{ sub("/.*", "", $4); print $4; exit }')
echo "$LL" | sync.sh put "$USCM_VM_ROLE-link-local"
PEER_LL=$(sync.sh get "$([ "$USCM_VM_ROLE" = a ] && echo b || echo a)-link-local" $T)%$NETDEV
LL=$LL%$NETDEV

# dropin_side STEP SERVER_IP PEER_IP PORT [CLIENT_ARGS...]: b's half of
# dropin.sh kernel_rping_side (a's)
dropin_side() {
  local step=$1 here=$2 peer=$3 port=$4 pid; shift 4
  sync.sh wait "kernel-$step-server-ready" $T
  run_to "dropin-$step-rping-c-to-kernel" "/tmp/$step-c.log" \
    "${DROPIN[@]}" rping -c -a "$peer" "$@" -p "$port" -v -C $N
  check_pings "dropin-$step-client-data" "/tmp/$step-c.log" 'ping data: ' $N
  "${DROPIN[@]}" rping -s -a "$here" -p $((port + 1)) -v > "/tmp/$step-s.log" 2>&1 & pid=$!
  wait_for "/tmp/$step-s.log" 'listening on' && sync.sh signal "dropin-$step-server-ready"
  finish "dropin-$step-rping-s-served-kernel" "$pid" "/tmp/$step-s.log"
  check_pings "dropin-$step-server-data" "/tmp/$step-s.log" 'server ping data: ' $N
  sync.sh wait "kernel-$step-client-done" $T
}

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules
  check ipv6-gid-a ipv6_address && sync.sh signal a-v6-ready
  sync.sh wait b-v6-ready $T
  kernel_rping_side v6 "$IP6" "$PEER6" 7180 -I "$IP6"
  kernel_rping_side ll "$LL" "$PEER_LL" 7182
  # b checks this too: a's console lines can be lost (seen once), b's FAIL is not
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  no_kernel_cm no-kernel-cm-b
  check ipv6-gid-b ipv6_address && sync.sh signal b-v6-ready
  sync.sh wait a-v6-ready $T
  dropin_side v6 "$IP6" "$PEER6" 7180 -I "$IP6"
  dropin_side ll "$LL" "$PEER_LL" 7182
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
