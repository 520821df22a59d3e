#!/usr/bin/env bash
# The VM lane's waits (tests/vm/lib.sh wait_for / kernel_listening, sync.sh wait) end
# after T seconds of the clock however slow a turn of their loop is. Under TCG a turn
# takes ~0.3 s, and waits that counted turns (T * 10 of them) ran 3x past their bound:
# tests/vm/bench/cmtime.sh's 400 s wait went on for 20 minutes.
# Here `sleep` is replaced by one that moves bash's clock ($SECONDS) by 1 s per turn
# and counts the turns: a wait of T seconds must give up after about T turns.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
. "$HERE/lib.sh"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
TURNS=$TMP/turns
sleep() { echo . >> "$TURNS"; SECONDS=$((SECONDS + 1)); }
export -f sleep
export TURNS
failed=0
turns() { [ -e "$TURNS" ] && wc -l < "$TURNS" || echo 0; }
expect() {  # expect NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name (turns $(turns))"; failed=1; fi
}

: > "$TMP/log"
T=5
rm -f "$TURNS"; ! wait_for "$TMP/log" 'ready' 2>/dev/null
expect wait_for-gives-up-after-T-seconds test "$(turns)" -le 6

rm -f "$TURNS"; echo "server: ready" > "$TMP/log"
expect wait_for-sees-the-line wait_for "$TMP/log" 'ready'

# the program it waits for is gone: no need to wait out T
: > "$TMP/log"; true & dead=$!; wait "$dead"
rm -f "$TURNS"; out=$(wait_for "$TMP/log" 'ready' "$dead" 2>&1); rc=$?
expect wait_for-stops-when-the-program-exited test "$rc" = 1 -a "$(turns)" = 0
expect wait_for-says-the-program-exited grep -q "pid $dead exited" <<< "$out"

rdma() { :; }   # no listener ever
rm -f "$TURNS"; kernel_listening 7471 2>/dev/null
expect kernel_listening-gives-up-after-T-seconds test "$(turns)" -le 6

mkdir "$TMP/sync"
rm -f "$TURNS"; USCM_VM_SYNC=$TMP/sync USCM_VM_ROLE=a bash "$HERE/sync.sh" wait never 5 2>/dev/null
expect sync-wait-gives-up-after-T-seconds test "$(turns)" -le 6

exit "$failed"
