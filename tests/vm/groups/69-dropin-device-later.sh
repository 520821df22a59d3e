#!/usr/bin/env bash
# A device that appears after a drop-in program started (issue 13; docs/API.md "Devices
# and ports that appear later"): one VM (rxe0 192.168.77.1 <-veth-> veth1 192.168.77.2),
# rxe1 deleted before the client starts and added again (`rdma link add rxe1 type rxe
# netdev veth1`) while it waits. Client A (tests/vm/behaviour/gid_moved -l) lists the
# devices (rdma_get_devices) and tries rdma_bind_addr of C = 192.168.77.2 before, then
# after the add lists them again and connects from C to a server on rxe0, one message
# echoed. Run twice in the same boot: first on the kernel's rdma_cm with the system
# librdmacm (the reference: librdmacm's rdma_get_devices lists the devices again at
# every call, and the kernel finds rxe1 for C at the call), then, with rdma_ucm /
# rdma_cm / ib_cm unloaded, both ends through `uscm exec`; the two outputs of A are
# compared line for line, A's rdma_bind_addr of C while rxe1 is gone checked on each: ENODEV
# (C is the host's, on a netdev with no RDMA device: the kernel's cma_acquire_dev_by_src_ip;
# the drop-in finds C among the host's addresses, getifaddrs, and on no port). On uscm, A's port on rxe1 is served by a uscmd of its own started when A
# opened it (uscm exec started rxe0's only: rxe1 did not exist).
# The server listens on 0.0.0.0 (started while rxe1 is gone) and is on rxe1 once it is
# added, as the kernel's cma_add_one puts every wildcard listener on a new device: after
# A, client B (gid_moved -l from S on rxe0) connects to C on rxe1 and its message comes
# back. On uscm the server lists its ports again once a second while it listens
# and at once on a device's uevent (docs/API.md); the check waits for its USCM_DEBUG line "listening on 0.0.0.0 port P
# (rxe1:1, a port added later)" before B starts (on the kernel the listen is there when
# `rdma link add` returns). B's outputs on the kernel and on uscm are compared too.
# The server also holds 0.0.0.0:P+100 with an id that is bound and never listens: the
# kernel's bind list is the host's (cma_ps), so the port is held on rxe1 once it is added
# and client H (gid_moved -b C P+100) is refused there (EADDRNOTAVAIL, cma_check_port);
# on uscm the server's uscm-ports thread binds it on rxe1's uscmd (USCM_DEBUG: "bound to
# 0.0.0.0 port P+100 (rxe1:1, a port added later)", waited on before H starts). H's
# outputs on the kernel and on uscm are compared. The uscm server lists its ports at once
# on the kernel's uevent of rxe1's uverbs device (USCM_DEBUG: "uscm-ports: listing now: a
# uevent says add@.../infiniband_verbs/uverbsN"), not at its next once-a-second listing.
# Then rxe1 is deleted again while A, which opened it (rdma_get_devices, its connection)
# and holds nothing on it any more, still runs: rxe has no disassociate_ucontext, so
# `rdma link del` returns only once every context of rxe1 is closed. A lists the devices
# again ("devices after removal: rxe0") once rxe1's uverbs device is gone; the system
# librdmacm closes its context there (sync_devices_list -> remove_cma_dev) and so must
# the drop-in (the library's context, the GID watch's context and thread, the port's
# uscm device and progress thread): the del must return within T while A still runs
# (a bounded wait on its exit status, not a sleep). rxe1 is added back after A exits.
# Then R (gid_moved -r C P+200) binds an id on rxe1 and waits for its next event,
# making no other call, and rxe1 is deleted. On uscm R's uscm-ports thread, which runs
# while a port is open, lists the devices at once on the uevent of rxe1's uverbs
# device's removal (USCM_DEBUG: "uscm-ports: listing now: a uevent says
# remove@.../infiniband_verbs/uverbsN"), R's id gets DEVICE_REMOVAL, R destroys it, the
# drop-in closes rxe1 and the del returns (before, the event came at the program's next
# call: R and the del waited for ever). On the kernel with rxe the event cannot come
# while R runs: the device's unregistration removes ib_uverbs' client (registered after
# rdma_cm's in this boot) before rdma_cm's, and ib_uverbs waits there for every context
# of the device (rxe has no disassociate_ucontext), R's librdmacm's among them (held for
# the bound id); cma_process_remove would send DEVICE_REMOVAL only after. So on the
# kernel the check is that R has no event once rxe1's uverbs device is gone, and the del
# returns once R is killed; R's outputs are not compared.
# Last, W (gid_moved -s 0.0.0.0 P+300 2), a wildcard server, listens while both devices
# are there and rxe0 is deleted: librdmacm's wildcard listener has no device (id->verbs
# NULL; the kernel's cma_process_remove destroys its listen on rxe0 and sends it no
# event), so the del returns while W runs (a bounded wait that gives up if W exits); on
# uscm W's own uscm id is on rxe0, the first port listed (USCM_DEBUG: "device removed:
# the wildcard id of port P+300 leaves rxe0:1 for rxe1:1"), where it kept rxe0 open and
# got DEVICE_REMOVAL until 2026-11-28. rxe0 is added back (on uscm W listens there again:
# "listening on 0.0.0.0 port P+300 (rxe0:1, a port added later)", waited on), then client
# V (gid_moved -c S C P+300) makes W's two connections to C, on rxe1, the port W's id
# moved to. V's outputs on the kernel and on uscm are compared. (A first version ran V from
# C to C while rxe0 was gone: it connected on the kernel; on uscm V's rdma_connect got no
# event and W no CONNECT_REQUEST within T, 2026-11-28. No group runs both ends on one
# uscm port; not investigated.)
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
# targets: //tests/vm/behaviour:gid_moved
. "$(dirname "$0")/../lib.sh"
vm_boot --cm --timeout 400
. "$VM_DIR/dropin.sh"

S=192.168.77.1 C=192.168.77.2
B=$USCM_VM_BIN/tests/vm/behaviour

# until_port yes|no [DEV IP]: until DEV (rxe1) exists with its port ACTIVE and IP's (C's)
# GID (yes), or is gone
until_port() {
  local dev=${2:-rxe1} ip=${3:-$C} end=$((SECONDS + T))
  while ((SECONDS < end)); do
    if grep -qs ACTIVE /sys/class/infiniband/$dev/ports/1/state &&
       grep -qsx "$(ipv4_gid $ip)" /sys/class/infiniband/$dev/ports/1/gids/*; then
      [ "$1" = yes ] && return 0
    elif [ "$1" = no ] && [ ! -e /sys/class/infiniband/$dev ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "$dev is not '$1' after ${T}s" >&2; return 1
}

# until_unlisted: until no uverbs device is rxe1's (the kernel deletes it before it waits
# for the contexts: libibverbs no longer lists rxe1)
until_unlisted() {
  local end=$((SECONDS + T))
  while ((SECONDS < end)); do
    grep -qsx rxe1 /sys/class/infiniband_verbs/uverbs*/ibdev || return 0
    sleep 0.1
  done
  echo "rxe1's uverbs device is still there after ${T}s" >&2; return 1
}

# uscmd_exits DEV: DEV's uscmd exits by itself once DEV is deleted (bounded by T): its
# umad file reads EIO, uscmd says "DEV port 1 is gone" and exits, so the next program on
# the device added back starts a fresh one. Until 2026-11-28 it lived on, serving nothing
# (its umad port the deleted device's), and the programs on the port added back found
# it (V got UNREACHABLE -110).
uscmd_exits() {
  local end=$((SECONDS + T))
  while pgrep -f "uscmd --ca $1 " > /dev/null; do
    ((SECONDS < end)) || { echo "$1's uscmd still runs ${T}s after $1 was deleted" >&2; return 1; }
    sleep 0.1
  done
}

# wildcard_own_port_removed MODE PORT: W, a wildcard server on both devices, rxe0 deleted
# while it runs (see the top)
wildcard_own_port_removed() {
  local mode=$1 port=$2 run=(timeout "$T") w
  [ "$mode" = uscm ] && run=("${USCM[@]}")
  "${run[@]}" "$B/gid_moved" -s 0.0.0.0 "$port" 2 > /tmp/$mode-w.log 2>&1 &
  w=$!
  check "$mode-w-listening" wait_for /tmp/$mode-w.log '^listening' $w
  rm -f /tmp/$mode-del-w.rc
  (rdma link del rxe0 > /tmp/$mode-del-w.log 2>&1; echo "rc=$?" > /tmp/$mode-del-w.rc) &
  check "$mode-del-rxe0-returns-while-w-runs" wait_for /tmp/$mode-del-w.rc '^rc=0$' $w
  check "$mode-w-still-running" kill -0 $w
  [ "$mode" = uscm ] && check_output "$mode-w-moved-to-rxe1" \
    "device removed: the wildcard id of port $port leaves rxe0:1 for rxe1:1" cat /tmp/$mode-w.log
  if [ "$mode" = uscm ]; then
    check "$mode-uscmd-rxe0-exits" uscmd_exits rxe0
    check_output "$mode-uscmd-rxe0-says-why" 'uscmd: rxe0 port 1 is gone: its umad file reads' \
      cat /tmp/uscmd-rxe0-1.log
  fi
  check "$mode-add-rxe0" rdma link add rxe0 type rxe netdev veth0
  check "$mode-rxe0-active" until_port yes rxe0 $S
  [ "$mode" = uscm ] && check "$mode-w-on-rxe0-again" wait_for /tmp/$mode-w.log \
    "listening on 0\.0\.0\.0 port $port \(rxe0:1, a port added later\)" $w
  echo go | "${run[@]}" "$B/gid_moved" -c $S $C "$port" > /tmp/$mode-v.out 2> /tmp/$mode-v.err
  check "$mode-v-echo-on-rxe1" grep -q '^connection 2: echo ok' /tmp/$mode-v.out
  if [ "$mode" = uscm ] && ! grep -q '^connection 2: echo ok' /tmp/$mode-v.out; then
    ps -o pid,etimes,args -C uscmd | sed 's/^/  uscmd| /'
    for f in /tmp/uscmd-rxe0-1.log /tmp/uscmd-rxe1-1.log; do tail -n 15 $f | sed "s#^#  $f| #"; done
    sed 's/^/  v stderr| /' /tmp/$mode-v.err | tail -n 20
  fi
  finish "$mode-w-exit" $w /tmp/$mode-w.log
  check_output "$mode-w-served-both" '^served 2: ' cat /tmp/$mode-w.log
}

# phase MODE PORT: rxe1 deleted, server on rxe0, A started, rxe1 added, A connects
phase() {
  local mode=$1 port=$2 run=(timeout "$T") run_a=(timeout $((3 * T))) server a r
  # A lives through B and the removal too: three steps' bound, not one
  [ "$mode" = uscm ] && run=("${USCM[@]}") &&
    run_a=(env USCM_DEBUG=1 timeout $((3 * T)) "$USCM_VM_BIN/tools/uscm" exec --)
  check "$mode-del-rxe1" rdma link del rxe1
  check "$mode-rxe1-gone" until_port no
  "${run[@]}" "$B/gid_moved" -s 0.0.0.0 "$port" 2 $((port + 100)) > /tmp/$mode-server.log 2>&1 &
  server=$!
  check "$mode-server-listening" wait_for /tmp/$mode-server.log '^listening' $server
  rm -f /tmp/go; mkfifo /tmp/go
  "${run_a[@]}" "$B/gid_moved" -l $C $S "$port" < /tmp/go > /tmp/$mode-a.out 2> /tmp/$mode-a.err &
  a=$!
  exec 3> /tmp/go   # A's stdin: one line once rxe1 is back
  check "$mode-a-waits" wait_for /tmp/$mode-a.out '^moved\?' $a
  check "$mode-add-rxe1" rdma link add rxe1 type rxe netdev veth1
  check "$mode-rxe1-active" until_port yes
  echo go >&3
  check "$mode-a-connected" wait_for /tmp/$mode-a.out '^removed\?' $a
  if [ "$mode" = uscm ]; then
    check "$mode-server-on-rxe1" wait_for /tmp/$mode-server.log \
      "listening on 0\.0\.0\.0 port $port \(rxe1:1, a port added later\)" $server
    check "$mode-hold-on-rxe1" wait_for /tmp/$mode-server.log \
      "bound to 0\.0\.0\.0 port $((port + 100)) \(rxe1:1, a port added later\)" $server
    check_output "$mode-uevent-listing" \
      'uscm-ports: listing now: a uevent says add@.*/infiniband_verbs/uverbs' cat /tmp/$mode-server.log
  fi
  "${run[@]}" "$B/gid_moved" -b $C $((port + 100)) > /tmp/$mode-h.out 2> /tmp/$mode-h.err
  check_output "$mode-hold-refused" '^bind held: EADDRNOTAVAIL$' cat /tmp/$mode-h.out
  echo go | "${run[@]}" "$B/gid_moved" -l $S $C "$port" > /tmp/$mode-b.out 2> /tmp/$mode-b.err
  check "$mode-b-echo" grep -q '^connection 1: echo ok' /tmp/$mode-b.out
  finish "$mode-server-exit" $server /tmp/$mode-server.log
  [ "$mode" = uscm ] && check uscmd-for-rxe1 pgrep -f 'uscmd --ca rxe1 --port 1'
  # rxe1 deleted while A runs, holding no id on it: the del returns once A closed rxe1
  rm -f /tmp/$mode-del.rc
  (rdma link del rxe1 > /tmp/$mode-del.log 2>&1; echo "rc=$?" > /tmp/$mode-del.rc) &
  check "$mode-rxe1-unlisted" until_unlisted
  echo go >&3
  check "$mode-a-listed-again" wait_for /tmp/$mode-a.out '^closed\?' $a
  check "$mode-del-returns-while-a-runs" wait_for /tmp/$mode-del.rc '^rc=0$'
  check "$mode-a-still-running" kill -0 $a
  exec 3>&-
  finish "$mode-a-exit" $a /tmp/$mode-a.out
  sed 's/^/  | /' /tmp/$mode-a.out
  check "$mode-del-rc" wait_for /tmp/$mode-del.rc '^rc=0$'   # after A's exit at the latest
  check "$mode-add-rxe1-again" rdma link add rxe1 type rxe netdev veth1
  check "$mode-rxe1-active-again" until_port yes
  # R's id on rxe1, R waiting for its next event, rxe1 deleted (see the top)
  "${run[@]}" "$B/gid_moved" -r $C $((port + 200)) > /tmp/$mode-r.out 2> /tmp/$mode-r.err &
  r=$!
  check "$mode-r-bound" wait_for /tmp/$mode-r.out '^bound: ok' $r
  rm -f /tmp/$mode-del-r.rc
  (rdma link del rxe1 > /tmp/$mode-del-r.log 2>&1; echo "rc=$?" > /tmp/$mode-del-r.rc) &
  if [ "$mode" = uscm ]; then
    check "$mode-r-removal" wait_for /tmp/$mode-r.out \
      '^event: RDMA_CM_EVENT_DEVICE_REMOVAL status 0$' $r
    finish "$mode-r-exit" $r /tmp/$mode-r.out
    check_output "$mode-r-destroyed" '^destroyed$' cat /tmp/$mode-r.out
    check_output "$mode-uevent-removal" \
      'uscm-ports: listing now: a uevent says remove@.*/infiniband_verbs/uverbs' cat /tmp/$mode-r.err
  else
    check "$mode-rxe1-unlisted-r" until_unlisted
    check "$mode-r-no-event-while-it-holds-rxe1" bash -c "kill -0 $r && ! grep -q '^event' /tmp/$mode-r.out"
    kill $r; wait $r 2>/dev/null
  fi
  check "$mode-del-r-returns" wait_for /tmp/$mode-del-r.rc '^rc=0$'
  check "$mode-add-rxe1-after-r" rdma link add rxe1 type rxe netdev veth1
  check "$mode-rxe1-active-after-r" until_port yes
  wildcard_own_port_removed "$mode" $((port + 300))
}

check kernel-cm-loaded grep -qw rdma_ucm /proc/modules
phase kernel 7410
check unload-kernel-cm modprobe -r rdma_ucm rdma_cm ib_cm
no_kernel_cm no-kernel-cm
phase uscm 7411
check uscm-a-echo grep -q '^connection 1: echo ok' /tmp/uscm-a.out
check_output kernel-bind-before-enodev '^bind before: ENODEV$' cat /tmp/kernel-a.out
check_output uscm-bind-before-enodev '^bind before: ENODEV$' cat /tmp/uscm-a.out
# same_as_kernel X: PASS when client X's outputs on the kernel and on uscm are the same
same_as_kernel() {
  if [ -s /tmp/kernel-$1.out ] && diff -q /tmp/kernel-$1.out /tmp/uscm-$1.out > /dev/null; then
    pass "$1-same-as-kernel"
  else
    diff -u /tmp/kernel-$1.out /tmp/uscm-$1.out | sed 's/^/  | /'
    sed 's/^/  uscm stderr| /' /tmp/uscm-$1.err | tail -n 20
    fail "$1-same-as-kernel" "the kernel's and uscm's outputs of ${1^^} differ (- kernel, + uscm)"
  fi
}
same_as_kernel a
same_as_kernel b
same_as_kernel h
same_as_kernel v
group_end
