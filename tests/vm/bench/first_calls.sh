#!/usr/bin/env bash
# tests/vm/bench/first_calls.sh [DIR...]: a program's first librdmacm calls through the
# drop-in (docs/API.md "A program's first calls"), in ONE VM boot, once per DIR (a
# bazel-bin-like directory: tools/uscm, tools/uscmd, api/librdmacm/librdmacm.so.1;
# default $USCM_VM_BIN), so an old and a new tree run side by side. Per DIR: uscmd on
# rxe0, then tests/vm/bench/first_calls.c (built here with the host's gcc against the
# system headers and -lrdmacm) three times through `uscm exec` (wall us, page faults,
# CPU ms of each of rdma_create_event_channel, the first and second rdma_create_id and
# rdma_bind_addr), then once under `strace -f -tt -T`: the syscalls of each call, all
# threads, by name, and the files opened. FIRST_KERNEL=1: the same program on the
# kernel CM (Debian's librdmacm; uscmd stopped, rdma_ucm loaded) at the end.
# FIRST_SMP=N: vCPUs (default 1). A bench, not a test. Run from the repository:
#   bazel build -c opt //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm &&
#   tests/vm/bench/first_calls.sh "$OLD" "$NEW" "$OLD" "$NEW"
. "$(dirname "$0")/../lib.sh"
if ! in_vm; then
  PROG=$(mktemp -d /tmp/first_calls.XXXXXX)/first_calls
  gcc -Wall -O2 -o "$PROG" "$(dirname "$0")/first_calls.c" -lrdmacm || exit 1
  DIRS=()
  for d in "${@:-$USCM_VM_BIN}"; do DIRS+=("$(readlink -f "$d")"); done
  echo "host load before: $(uptime)"
  "$VM_DIR/boot.sh" --timeout 1500 --smp "${FIRST_SMP:-1}" --env "USCM_VM_BIN=$USCM_VM_BIN" \
    --env "FIRST_PROG=$PROG" --env "FIRST_DIRS=${DIRS[*]}" --env "FIRST_KERNEL=${FIRST_KERNEL:-0}" \
    -- "bash $(readlink -f "$0")"
  rc=$?
  rm -rf "$(dirname "$PROG")"
  echo "host load after: $(uptime)"
  exit $rc
fi

A=192.168.77.1
# calls_by_marker TRACE: each call's syscalls (every thread, from its marker to the
# next), by name, and the paths opened (numbers as N).
calls_by_marker() {
  awk '{ call = $3; sub(/\(.*/, "", call)
         if ($3 == "write(-1,") { w = $4; gsub(/[",]/, "", w); win = w; order[++no] = w; next }
         if (call == "<...") call = $4 " (resumed)"
         if (win == "") win = "load"
         k[win, call]++; tot[win]++
         if (call == "openat") { p = $0; sub(/^[^"]*"/, "", p); sub(/".*/, "", p); gsub(/[0-9]+/, "N", p); o[win, p]++ } }
    END { order[0] = "load"; for (i = 0; i < no; i++) { w = order[i]; line = ""
            for (x in k) { split(x, s, SUBSEP); if (s[1] == w) line = line " " s[2] " " k[x] }
            printf "  %s: %d calls:%s\n", w, tot[w], line
            for (x in o) { split(x, s, SUBSEP); if (s[1] == w && o[x] > 1) printf "    open %d %s\n", o[x], s[2] } } }' "$1"
}
for BIN in $FIRST_DIRS; do
  echo "== $BIN; load: $(cat /proc/loadavg)"
  "$BIN/tools/uscmd" --ca rxe0 --port 1 > /tmp/uscmd.log 2>&1 & UPID=$!
  wait_for /tmp/uscmd.log '^uscmd: rxe0 port 1' || fail first-calls "uscmd did not start"
  for r in 1 2 3; do "$BIN/tools/uscm" exec --device rxe0 -- "$FIRST_PROG" $A; done
  "$BIN/tools/uscm" exec --device rxe0 -- strace -f -tt -T -o /tmp/first.trace "$FIRST_PROG" $A > /dev/null
  calls_by_marker /tmp/first.trace
  stop_pid "$UPID"
done
if [ "${FIRST_KERNEL:-0}" = 1 ]; then
  modprobe rdma_ucm || fail first-calls "modprobe rdma_ucm"
  echo "== kernel CM (Debian's librdmacm); load: $(cat /proc/loadavg)"
  for r in 1 2 3; do "$FIRST_PROG" $A; done
  strace -f -tt -T -o /tmp/first.trace "$FIRST_PROG" $A > /dev/null
  calls_by_marker /tmp/first.trace
fi
exit $FAILED
