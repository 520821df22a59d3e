#!/usr/bin/env bash
# tests/vm/bench/uscmd_starts.sh BEFORE AFTER [RUNS]: both ports' uscmd starts (issue 13,
# docs/ROUTER.md "On demand"), in ONE VM boot, BEFORE's and AFTER's binaries alternately
# (each a bazel-bin-like directory: tools/uscm, tools/uscmd, api/librdmacm/librdmacm.so.1;
# copy a tree's aside before rebuilding), RUNS rounds (default 5), no uscmd running before
# each run. A: `uscm exec --idle-exit 1 -- true` (uscm exec starts rxe0's and rxe1's);
# B: the drop-in alone, `rping -s -a 0.0.0.0` (its wildcard bind starts them), until its
# "listening on" line. Each run prints its whole time and each uscmd's own "serving N ms
# after its fork" (rxe0 / rxe1). A bench, not a test. From the repository:
#   tests/vm/bench/uscmd_starts.sh /tmp/before /tmp/after 6
. "$(dirname "$0")/../lib.sh"
if ! in_vm; then
  [ $# -ge 2 ] || { echo "usage: $0 BEFORE AFTER [RUNS]" >&2; exit 2; }
  echo "host load before: $(uptime)"
  "$VM_DIR/boot.sh" --timeout 900 --env "STARTS_DIRS=$(readlink -f "$1") $(readlink -f "$2")" \
    --env "STARTS_RUNS=${3:-5}" -- "bash $(readlink -f "$0")"
  rc=$?
  echo "host load after: $(uptime)"
  exit $rc
fi

read -r BEFORE AFTER <<< "$STARTS_DIRS"
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
uscmds() { pgrep -f "^($BEFORE|$AFTER)/tools/uscmd --ca"; }
stop_uscmds() {
  local pids i
  # shellcheck disable=SC2086  # one pid a word
  pids=$(uscmds) && kill $pids
  for ((i = 0; i < 100; i++)); do uscmds > /dev/null || break; sleep 0.1; done
  rm -f /tmp/uscmd-rxe0-1.log /tmp/uscmd-rxe1-1.log
}
served() {
  local p
  for p in rxe0 rxe1; do
    grep -ho 'serving [0-9]* ms' /tmp/uscmd-$p-1.log | cut -d' ' -f2 | tr '\n' ' '
  done
}
for d in "$BEFORE" "$AFTER"; do "$d/tools/uscmd" --help > /dev/null 2>&1; "$d/tools/uscm" --help > /dev/null 2>&1; done
echo "load: $(cat /proc/loadavg)"
port=7300
for ((r = 1; r <= STARTS_RUNS; r++)); do
  order="$BEFORE $AFTER"; [ $((r % 2)) = 0 ] && order="$AFTER $BEFORE"
  for d in $order; do
    stop_uscmds
    t=$(date +%s%N)
    "$d/tools/uscm" exec --idle-exit 1 --libdir "$d/api/librdmacm" -- true; rc=$?
    echo "A run $r $d: rc $rc, uscm exec $(ms "$t") ms; uscmd served rxe0 / rxe1 after $(served)ms"
  done
  for d in $order; do
    stop_uscmds
    port=$((port + 1))
    t=$(date +%s%N)
    USCM_DEBUG=1 USCM_USCMD="$d/tools/uscmd" LD_LIBRARY_PATH="$d/api/librdmacm" \
      rping -s -a 0.0.0.0 -p $port > /tmp/rping.log 2>&1 & pid=$!
    for ((i = 0; i < 6000; i++)); do grep -q 'listening on' /tmp/rping.log && break; sleep 0.01; done
    took=$(ms "$t")
    kill $pid; wait $pid 2> /dev/null
    echo "B run $r $d: rping listening after $took ms; uscmd served rxe0 / rxe1 after $(served)ms;" \
      "$(grep -c ': started ' /tmp/rping.log) started"
  done
done
stop_uscmds
