#!/bin/bash
# Builds the wire-layer fuzz targets (every CM and SA parser) with --config=fuzz (libFuzzer, clang-14)
# and runs each one, one at a time, for a fixed number of iterations, starting
# from the built-in seeds (one sample MAD per CM type; the router target from
# router_fuzz_seeds' conversations).
#
#   tools/fuzz.sh [iterations]        default 100000
#
# Prints one line per target: name, iterations done, result, exec/s, coverage.
# Environment: BAZEL (default "bazel"; e.g. "bazel --output_base=/root/.cache/bazel-me"),
# BAZEL_FLAGS (e.g. "--symlink_prefix=/tmp/me-"), FUZZ_WORKDIR (default: a temp dir;
# crash inputs and per-target corpora are kept there).
set -euo pipefail

ITERATIONS="${1:-100000}"
BAZEL="${BAZEL:-bazel}"
BAZEL_FLAGS="${BAZEL_FLAGS:-}"
cd "$(dirname "$0")/.."

TARGETS=(req mra rej rep rtu dreq drep sidr_req sidr_rep lap apr any_cm cma_header
         rmpp path_record mcmember_record service_record class_port_info
         # uscmd's privilege boundary (cm/router/fuzz): the frame decoders, and a
         # whole router fed by three clients and the wire (slower).
         router:frame_decoder router:router_frame)
WORK="${FUZZ_WORKDIR:-$(mktemp -d /tmp/uscm-fuzz.XXXXXX)}"
mkdir -p "$WORK"

# Seeds come from the plain build of a target (its driver main can write them).
# The router target's own seeds are conversations in its input format.
$BAZEL build $BAZEL_FLAGS //mad/wire/fuzz:any_cm_fuzzer //cm/router/fuzz:router_fuzz_seeds \
  >"$WORK/build-default.log" 2>&1 ||
  { echo "default build failed; see $WORK/build-default.log"; exit 1; }
PLAIN_BIN="$($BAZEL info $BAZEL_FLAGS bazel-bin 2>/dev/null)"
"$PLAIN_BIN/mad/wire/fuzz/any_cm_fuzzer" --write_seeds "$WORK/seeds" >/dev/null
"$PLAIN_BIN/cm/router/fuzz/router_fuzz_seeds" "$WORK/router-seeds" >/dev/null

$BAZEL build $BAZEL_FLAGS --config=fuzz //mad/wire/fuzz:all //cm/router/fuzz:all \
  >"$WORK/build-fuzz.log" 2>&1 ||
  { echo "fuzz build failed; see $WORK/build-fuzz.log"; exit 1; }
FUZZ_OUT="$($BAZEL info $BAZEL_FLAGS --config=fuzz bazel-bin 2>/dev/null)"

printf '%-20s %12s  %-6s %10s %8s\n' target iterations result exec/s cov
failed=0
for target in "${TARGETS[@]}"; do
  t="${target#router:}"
  FUZZ_BIN="$FUZZ_OUT/mad/wire/fuzz"
  [[ "$target" == router:* ]] && FUZZ_BIN="$FUZZ_OUT/cm/router/fuzz"
  corpus="$WORK/corpus-$t"
  mkdir -p "$corpus"
  log="$WORK/$t.log"
  seeds="$WORK/seeds" max_len=512
  [[ "$t" == router_frame ]] && seeds="$WORK/router-seeds" max_len=1024
  if "$FUZZ_BIN/${t}_fuzzer" -runs="$ITERATIONS" -seed=1 -max_len="$max_len" \
      -artifact_prefix="$WORK/$t-" -print_final_stats=1 \
      "$corpus" "$seeds" >"$log" 2>&1; then
    result=OK
  else
    result=FAIL
    failed=1
  fi
  runs="$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)"
  execs="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  printf '%-20s %12s  %-6s %10s %8s\n' "${t}_fuzzer" "${runs:-?}" "$result" "${execs:-?}" \
    "${cov:-?}"
done
echo "logs, corpora and any crash inputs: $WORK"
exit "$failed"
