#!/usr/bin/env bash
# The whole test suite: installs what it needs, runs every Bazel test natively and
# again under ASan + UBSan, then the VM lane (tests/vm) once, then prints one line
# "N passed, N failed" (test cases).
#   tests/run.sh            everything
#   tests/run.sh --fast     native build only (no sanitizer pass)
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

configs=("" "--config=asan")
[[ "${1:-}" == "--fast" ]] && configs=("")

passed=0; failed=0; rc=0
problems=$(mktemp)
for cfg in "${configs[@]}"; do
  label=${cfg:-native}
  echo "=== bazel test ${label} ==="
  out=$(mktemp)
  # shellcheck disable=SC2086
  bazel test $cfg --keep_going //... 2>&1 | tee "$out"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
  # Count test cases from the JUnit XML that every cc_test writes.
  logs=$(bazel info $cfg bazel-testlogs 2>/dev/null)
  read -r p f < <(python3 tests/count_results.py "$logs")
  echo "${label}: ${p} passed, ${f} failed"
  passed=$((passed + p)); failed=$((failed + f))
  # Keep what went wrong for the end of the output, where a CI excerpt shows it.
  grep -E "^(//|ERROR:).*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)|^ERROR:" "$out" |
    sed "s/^/[${label}] /" >>"$problems"
  for t in $(grep -oE "^//[^ ]+" "$out" | sort -u); do
    grep -qE "^${t} .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)" "$out" || continue
    log="$logs/$(echo "${t#//}" | tr ':' '/')/test.log"
    { echo "[${label}] --- last lines of ${t} ---"; tail -n 25 "$log" 2>/dev/null; } >>"$problems"
  done
  rm -f "$out"
done
if [[ -s "$problems" ]]; then echo "=== what went wrong ==="; cat "$problems"; fi
rm -f "$problems"
# The VM lane (tests/vm, docs/VM.md): once, native build; its counts join the total.
echo "=== vm lane ==="
vm_log=$(mktemp)
tests/vm/run.sh | tee "$vm_log"
read -r vp vf < <(sed -n 's/^vm: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$vm_log")
rm -f "$vm_log"
passed=$((passed + ${vp:-0})); failed=$((failed + ${vf:-1}))   # no count line: one failure
[[ $rc -ne 0 && $failed -eq 0 ]] && failed=1   # a target that failed to build counts
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
