#!/usr/bin/env bash
# QEMU's live migration over RDMA with Debian 12's unmodified qemu-system-x86_64 (7.2,
# links librdmacm; the host's binary, seen through the VM's read-only /) on uscm's
# drop-in librdmacm.so.1 through `uscm exec` (VM b, no kernel CM) against the kernel CM
# (VM a), both roles (docs/API.md "Other programs: QEMU's RDMA migration"):
#   1. the destination (`-incoming rdma:IP:PORT`) on the kernel CM <- the source on the
#      drop-in;
#   2. the destination on the drop-in <- the source on the kernel CM.
# migration/rdma.c: the destination binds, listens and accepts with private data from
# its main loop (the event channel's fd); the source resolves the address and the route,
# connects with private data (its capabilities), and the two exchange their RAM blocks'
# keys over SEND/RECV, then the source RDMA-WRITEs guest RAM into the destination's
# registered RAM.
# The migrated guest: nested qemu under TCG, `-M pc -m 64 -nodefaults`, no kernel (its
# firmware finds nothing to boot), 4 MiB of random bytes loaded at 16 MiB (`-device
# loader`) so that the RAM sent is not only zero pages; the source runs (`cont`) when it
# migrates, the destination has `-S` and so ends `paused`.
# Checked, each way: `query-migrate` `completed` on the source (qmp.py wait-migrate)
# and on the destination; the RAM sent (`normal-bytes` at least the 4 MiB loaded); the
# source `postmigrate`, the destination `paused`; the destination's 64 MiB of guest RAM
# (`pmemsave`) equal to the source's byte for byte (md5 through sync.sh); both qemus
# quit with status 0.
# Readiness: the kernel's listener in `rdma resource`, the drop-in's "listening on"
# (USCM_DEBUG=1); QMP sockets are tried until qemu opened them (qmp.py).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
PORT=4444
PATTERN_BYTES=4194304
QEMU=(qemu-system-x86_64 -M pc -m 64 -nodefaults -display none -accel tcg -S
  -device loader,file=/tmp/pattern.bin,addr=0x1000000,force-raw=on)
QMP=(/usr/bin/python3 "$VM_DIR/qmp.py")

if [ "$USCM_VM_ROLE" = a ]; then
  me=kernel peer=dropin RUN=(timeout "$T")
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules
else
  me=dropin peer=kernel RUN=("${USCM[@]}")
  no_kernel_cm no-kernel-cm-b
fi
head -c "$PATTERN_BYTES" /dev/urandom > /tmp/pattern.bin

# ram_md5 NAME SOCKET: the md5 of the guest's 64 MiB of RAM (pmemsave, QEMU's own file)
ram_md5() {
  rm -f /tmp/ram-$1.img
  "${QMP[@]}" "$2" pmemsave '{"val": 0, "size": 67108864, "filename": "/tmp/ram-'"$1"'.img"}' \
    > /dev/null && md5sum < /tmp/ram-$1.img | cut -d' ' -f1
}

# state NAME SOCKET STATUS: query-status says STATUS
state() {
  check_output "$1" "\"status\": \"$3\"" "${QMP[@]}" "$2" query-status
}

# quit NAME SOCKET PID LOG: QMP quit, qemu exits 0
quit() { "${QMP[@]}" "$2" quit > /dev/null; finish "$1" "$3" "$4"; }

# destination STEP: -incoming, ready, waits for the source, checks, quits
destination() {
  local sock=/tmp/qmp-dst-$1.sock log=/tmp/qemu-dst-$1.log pid
  "${RUN[@]}" "${QEMU[@]}" -qmp "unix:$sock,server=on,wait=off" \
    -incoming "rdma:$IP:$PORT" > "$log" 2>&1 & pid=$!
  if [ "$me" = kernel ]; then kernel_listening $PORT; else
    wait_for "$log" "rdma_listen: listening on .* port $PORT" "$pid"; fi &&
    sync.sh signal "$me-dst-$1-ready"
  sync.sh wait "$peer-src-$1-done" "$T"
  check "$me-dst-$1-completed" "${QMP[@]}" "$sock" wait-migrate "$T"
  printf '  = %s\n' "$OUT"
  state "$me-dst-$1-paused" "$sock" paused
  local mine theirs; mine=$(ram_md5 dst "$sock"); theirs=$(sync.sh get "$peer-src-$1-md5" "$T")
  check "$me-dst-$1-ram-equal" test -n "$mine" -a "$mine" = "$theirs"
  printf '  = %s (source %s)\n' "$mine" "$theirs"
  quit "$me-dst-$1-exit" "$sock" "$pid" "$log"
}

# source STEP: runs the guest, migrates to the peer, checks, quits
source_() {
  local sock=/tmp/qmp-src-$1.sock log=/tmp/qemu-src-$1.log pid
  "${RUN[@]}" "${QEMU[@]}" -qmp "unix:$sock,server=on,wait=off" > "$log" 2>&1 & pid=$!
  sync.sh wait "$peer-dst-$1-ready" "$T"
  "${QMP[@]}" "$sock" cont > /dev/null
  "${QMP[@]}" "$sock" migrate "{\"uri\": \"rdma:$PEER:$PORT\"}" > /dev/null
  check "$me-src-$1-completed" "${QMP[@]}" "$sock" wait-migrate "$T"
  printf '  = %s\n' "$OUT"
  check "$me-src-$1-ram-sent" /usr/bin/python3 -c '
import json, sys
ram = json.loads(sys.argv[1])["ram"]
print("normal-bytes", ram["normal-bytes"], "transferred", ram["transferred"], "total", ram["total"])
sys.exit(0 if ram["normal-bytes"] >= int(sys.argv[2]) else 1)' "$OUT" "$PATTERN_BYTES"
  printf '  = %s\n' "$OUT"
  state "$me-src-$1-postmigrate" "$sock" postmigrate
  ram_md5 src "$sock" | sync.sh put "$me-src-$1-md5"
  sync.sh signal "$me-src-$1-done"
  sync.sh wait "$peer-dst-$1-checked" "$T"
  quit "$me-src-$1-exit" "$sock" "$pid" "$log"
}

# 1. the kernel's destination <- the drop-in's source; 2. the reverse
if [ "$me" = kernel ]; then
  destination 1; sync.sh signal kernel-dst-1-checked
  source_ 2
else
  source_ 1
  destination 2; sync.sh signal dropin-dst-2-checked
  check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
fi

if [ "$USCM_VM_ROLE" = a ]; then
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done "$T"
else
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
