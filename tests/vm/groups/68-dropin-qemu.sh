#!/usr/bin/env bash
# QEMU's live migration over RDMA with Debian 12's unmodified qemu-system-x86_64 (7.2,
# links librdmacm; the host's binary, seen through the VM's read-only /) on uscm's
# drop-in librdmacm.so.1 through `uscm exec` (VM b, no kernel CM) against the kernel CM
# (VM a), both roles at once (docs/API.md "Other programs: QEMU's RDMA migration"): each
# VM runs a destination qemu (`-incoming rdma:IP:PORT`, `-S`) and a source qemu; once the
# peer's destination listens, its source migrates there, so the drop-in's source ->
# the kernel's destination and the kernel's source -> the drop-in's destination overlap.
# migration/rdma.c: the destination binds, listens and accepts with private data from
# its main loop (the event channel's fd); the source resolves the address and the route,
# connects with private data (its capabilities), the two exchange their RAM blocks' keys
# over SEND/RECV, and the source RDMA-WRITEs guest RAM into the destination's.
# The migrated guest: nested qemu under TCG, `-M pc -m 16 -nodefaults`, no kernel (its
# firmware finds nothing to boot), 2 MiB of random bytes loaded at 8 MiB (`-device
# loader`) so that the RAM sent is not only zero pages; the source runs (`cont`) when it
# migrates; the destination has `-S`, so it ends `paused`.
# Checked, each way: `query-migrate` `completed` on the source (qmp.py wait-migrate)
# and on the destination; the RAM sent (`normal-bytes` at least the 2 MiB loaded); the
# source `postmigrate`, the destination `paused`; the destination's 16 MiB of guest RAM
# (`pmemsave`) equal to the source's byte for byte (md5 through sync.sh); both qemus
# quit with status 0.
# Readiness: the kernel's listener in `rdma resource`, the drop-in's "listening on"
# (USCM_DEBUG=1); QMP sockets are tried until qemu opened them (qmp.py). Each qemu lives
# through the whole group (bounded by 3T, not T: at host load 9 one migration took 60 s
# and a qemu's T ran out between its migration and its checks).
# USCM_QEMU_REFERENCE=1: the same checks with the kernel CM in VM b too (the reference
# figures in docs/API.md).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
if [ -n "${USCM_QEMU_REFERENCE:-}" ]; then
  vm_pair --cm-a --cm-b --env USCM_QEMU_REFERENCE=1 --timeout 400
else
  vm_pair --cm-a --timeout 400
fi
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
PORT=4444
PATTERN_BYTES=2097152 RAM_MIB=16
QEMU=(qemu-system-x86_64 -M pc -m "$RAM_MIB" -nodefaults -display none -accel tcg -S
  -device "loader,file=/tmp/pattern.bin,addr=0x800000,force-raw=on")
QMP=(/usr/bin/python3 "$VM_DIR/qmp.py")
PMEMSAVE='{"val": 0, "size": '$((RAM_MIB << 20))', "filename": "/tmp/ram.img"}'

B=${USCM_QEMU_REFERENCE:+kernel-b}   # VM b's name in the checks
B=${B:-dropin}
if [ "$USCM_VM_ROLE" = a ]; then
  me=kernel peer=$B RUN=(timeout $((3 * T)))
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules
elif [ "$B" = kernel-b ]; then
  me=$B peer=kernel RUN=(timeout $((3 * T)))
  check kernel-cm-loaded-b grep -qw rdma_ucm /proc/modules
else
  me=$B peer=kernel RUN=(env USCM_DEBUG=1 timeout $((3 * T)) "$USCM_VM_BIN/tools/uscm" exec --)
  no_kernel_cm no-kernel-cm-b
fi
head -c "$PATTERN_BYTES" /dev/urandom > /tmp/pattern.bin

# line N FILE: line N of FILE (qmp.py prints one line per step)
line() { sed -n "$1p" "$2"; }
# has NAME FILE N REGEX: line N of FILE matches REGEX
has() {
  if line "$3" "$2" | grep -Eq -- "$4"; then pass "$1"; printf '  = %s\n' "$(line "$3" "$2")"; else
    sed 's/^/  | /' "$2"; fail "$1" "line $3 of $2 does not match /$4/"
  fi
}
# ram_md5: the md5 of the guest RAM that pmemsave wrote
ram_md5() { md5sum < /tmp/ram.img | cut -d' ' -f1; }

# Each VM runs a destination (-incoming, -S) and a source qemu from the start; once the
# peer's destination listens, its source migrates to it: the two directions overlap.
DST=/tmp/qmp-dst.sock SRC=/tmp/qmp-src.sock
"${RUN[@]}" "${QEMU[@]}" -qmp "unix:$DST,server=on,wait=off" \
  -incoming "rdma:$IP:$PORT" > /tmp/qemu-dst.log 2>&1 & dst=$!
"${RUN[@]}" "${QEMU[@]}" -qmp "unix:$SRC,server=on,wait=off" > /tmp/qemu-src.log 2>&1 & src=$!
if [ "$me" != dropin ]; then kernel_listening $PORT; else
  wait_for /tmp/qemu-dst.log "rdma_listen: listening on .* port $PORT" "$dst"; fi &&
  sync.sh signal "$me-dst-ready"

# the source: the guest runs, migrates, stops (postmigrate); its RAM's md5 to the peer
sync.sh wait "$peer-dst-ready" "$T"
rc=0
"${QMP[@]}" "$SRC" cont "migrate={\"uri\": \"rdma:$PEER:$PORT\"}" "wait-migrate=$T" \
  query-status "pmemsave=$PMEMSAVE" > /tmp/qmp-src.out 2>&1 || rc=$?
if [ "$rc" = 0 ]; then pass "$me-src-to-$peer"; else
  sed 's/^/  | /' /tmp/qmp-src.out; fail "$me-src-to-$peer" "qmp.py exit $rc: $(tail -n 1 /tmp/qmp-src.out)"
fi
has "$me-src-completed" /tmp/qmp-src.out 3 '"status": "completed"'
normal=$(line 3 /tmp/qmp-src.out | grep -o '"normal-bytes": [0-9]*' | grep -o '[0-9]*$')
check "$me-src-ram-sent" test "${normal:-0}" -ge "$PATTERN_BYTES"
printf '  = normal-bytes %s\n' "$normal"
has "$me-src-postmigrate" /tmp/qmp-src.out 4 '"status": "postmigrate"'
ram_md5 | sync.sh put "$me-src-md5"

# the destination: completed, paused (-S), the source's RAM byte for byte
sync.sh wait "$peer-src-md5" "$T"
rm -f /tmp/ram.img   # the source's, written above
rc=0
"${QMP[@]}" "$DST" "wait-migrate=$T" query-status "pmemsave=$PMEMSAVE" > /tmp/qmp-dst.out 2>&1 || rc=$?
if [ "$rc" = 0 ]; then pass "$me-dst-from-$peer"; else
  sed 's/^/  | /' /tmp/qmp-dst.out; fail "$me-dst-from-$peer" "qmp.py exit $rc: $(tail -n 1 /tmp/qmp-dst.out)"
fi
has "$me-dst-completed" /tmp/qmp-dst.out 1 '"status": "completed"'
has "$me-dst-paused" /tmp/qmp-dst.out 2 '"status": "paused"'
mine=$(ram_md5) theirs=$(sync.sh get "$peer-src-md5" "$T")
check "$me-dst-ram-equal" test -n "$mine" -a "$mine" = "$theirs"
printf '  = %s (source %s)\n' "$mine" "$theirs"

# both quit once the peer has checked its destination (its md5 came from this source)
sync.sh signal "$me-dst-checked"
sync.sh wait "$peer-dst-checked" "$T"
"${QMP[@]}" "$SRC" quit > /dev/null; finish "$me-src-exit" "$src" /tmp/qemu-src.log
"${QMP[@]}" "$DST" quit > /dev/null; finish "$me-dst-exit" "$dst" /tmp/qemu-dst.log

if [ "$USCM_VM_ROLE" = a ]; then
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done "$T"
else
  [ "$B" = dropin ] && check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
