#!/usr/bin/env bash
# The whole test suite: installs what it needs, checks the layers of the tree
# (tools/check_layers.py), runs every Bazel test natively and again under
# ASan + UBSan (but those tagged no_asan), then the VM lane (tests/vm) once,
# two groups at a time, then prints one line
# "N passed, N failed" (test cases).
#   tests/run.sh            everything
#   tests/run.sh --fast     native build only (no sanitizer pass)
#   tests/run.sh [--fast] PATTERN...   only these Bazel targets, no VM lane
# apt, Bazel and the VM lane write to logs in $USCM_LOG_DIR (default /tmp/uscm-logs);
# the terminal gets one line per step, the counts, and what went wrong (failing
# targets with the end of their test.log, build errors).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
source tools/quiet.sh

configs=("" "--config=asan")
[[ "${1:-}" == "--fast" ]] && { configs=(""); shift; }
patterns=("$@")
((${#patterns[@]})) || patterns=(//...)

passed=0; failed=0; rc=0
problems=$(mktemp)
# The VM lane's kernel, initramfs and unpacked packages (tests/vm/prepare.sh: downloads,
# depmod) are fetched while Bazel builds; the lane's own prepare.sh then finds them cached.
prep_pid=
if [[ "${patterns[*]}" == //... ]]; then
  tests/vm/prepare.sh >/dev/null 2>"$USCM_LOG_DIR/vm-prepare.log" & prep_pid=$!
fi
# The layers of the tree (tools/check_layers.py): every include goes down, no two
# rooms include each other. One check per room.
echo "=== layers ==="
layers_out=$(tools/check_layers.py)
printf '%s\n' "$layers_out" | grep -v '^layers: ' | sed 's/^/[layers] /' >>"$problems"
printf '%s\n' "$layers_out" | tail -n 1
read -r p f < <(printf '%s\n' "$layers_out" | sed -n 's/^layers: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
for cfg in "${configs[@]}"; do
  label=${cfg:-native}
  echo "=== bazel test ${label} ==="
  name=${cfg#--config=}
  out=$USCM_LOG_DIR/test-${name:-native}.log
  # The sanitizer pass builds the tests and what they run, not the benches, fuzzers and
  # VM-lane programs, which the native pass builds (and the fuzzers have a config of
  # their own): ~50 binaries fewer to compile and link with ASan.
  # Tests tagged no_asan (packaging) run in the native pass only.
  only=; [[ -n "$cfg" ]] && only="--build_tests_only --test_tag_filters=-no_asan"
  # shellcheck disable=SC2086
  quiet_run "$out" "bazel test ${cfg:+$cfg }${only:+$only }--keep_going ${patterns[*]}" \
    bazel test $cfg $only --keep_going "${patterns[@]}" || rc=1
  # Bazel's own count of targets ("Executed 3 out of 93 tests: 93 tests pass.")
  grep -E '^Executed [0-9]+ out of [0-9]+ tests?' "$out" | tail -n 1
  # Count test cases from the JUnit XML that every cc_test writes.
  logs=$(bazel info $cfg bazel-testlogs 2>/dev/null)
  # Only the targets this run reported (not logs of targets since deleted).
  # shellcheck disable=SC2046
  read -r p f < <(python3 tests/count_results.py "$logs" $(grep -oE "^//[^ ]+" "$out" | sort -u))
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
  if grep -q "^\[${label}\]" "$problems"; then
    echo "[${label}] (the whole bazel output: ${out})" >>"$problems"
  fi
done
if [[ -s "$problems" ]]; then echo "=== what went wrong ==="; cat "$problems"; fi
rm -f "$problems"
if [[ "${patterns[*]}" != //... ]]; then   # a subset: no VM lane
  [[ $rc -ne 0 && $failed -eq 0 ]] && failed=1
  echo "${passed} passed, ${failed} failed"
  [[ $failed -eq 0 ]]; exit
fi
# The VM lane (tests/vm, docs/VM.md): once, native build; its counts join the total.
# Its full output (build, per-check PASS lines) goes to the log; the terminal gets
# each group's count line and anything that failed.
echo "=== vm lane ==="
[[ -n "$prep_pid" ]] && wait "$prep_pid"   # a failure shows again in the lane's own prepare
vm_log=$USCM_LOG_DIR/vm.log
quiet_run "$vm_log" "tests/vm/run.sh" tests/vm/run.sh
grep -E '^(FAIL |note: |  \| |--- |vm: )' "$vm_log"
read -r vp vf < <(sed -n 's/^vm: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$vm_log")
passed=$((passed + ${vp:-0})); failed=$((failed + ${vf:-1}))   # no count line: one failure
[[ -n "${vp:-}" ]] || quiet_tail "$vm_log" 2>&1
[[ $rc -ne 0 && $failed -eq 0 ]] && failed=1   # a target that failed to build counts
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
