#!/usr/bin/env bash
# The whole test suite: installs what it needs, runs every Bazel test natively and
# again under ASan + UBSan, then prints one line "N passed, N failed" (test cases).
#   tests/run.sh            everything
#   tests/run.sh --fast     native build only (no sanitizer pass)
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

configs=("" "--config=asan")
[[ "${1:-}" == "--fast" ]] && configs=("")

passed=0; failed=0; rc=0
for cfg in "${configs[@]}"; do
  label=${cfg:-native}
  echo "=== bazel test ${label} ==="
  # shellcheck disable=SC2086
  bazel test $cfg --keep_going //... || rc=1
  # Count test cases from the JUnit XML that every cc_test writes.
  read -r p f < <(python3 tests/count_results.py "$(bazel info $cfg bazel-testlogs 2>/dev/null)")
  echo "${label}: ${p} passed, ${f} failed"
  passed=$((passed + p)); failed=$((failed + f))
done
[[ $rc -ne 0 && $failed -eq 0 ]] && failed=1   # a target that failed to build counts
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
