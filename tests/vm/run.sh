#!/usr/bin/env bash
# tests/vm/run.sh - the VM lane: builds the binaries the checks use, then runs every
# executable tests/vm/groups/*.sh (one VM boot, or one pair boot, each), two at a time
# (USCM_VM_JOBS), printed in order. A group prints
# "PASS name" / "FAIL name: why" lines; a group that ends non-zero without any FAIL line
# counts as one failure. Last line: "vm: N passed, N failed"; exit status 1 on failure.
#
#   tests/vm/run.sh [GROUP-NAME-SUBSTRING...]
# Each group names the Bazel targets it needs in a "# targets:" comment line.
# Environment: BAZEL (default bazel), USCM_VM_BAZEL_FLAGS (e.g. --symlink_prefix=/tmp/x-),
# USCM_VM_BIN (skip the build and use this bazel-bin), USCM_VM_LOGS (keep group logs),
# USCM_VM_JOBS (groups at a time, default 2).
# Needs root (qemu, apt for tests/vm/prepare.sh, the kernel cache in /var/cache/uscm-vm).
set -uo pipefail
cd "$(dirname "$0")/../.."
VM=tests/vm
# each group names the Bazel targets it runs in a comment line "# targets: //a:b //c:d"
mapfile -t TARGETS < <(sed -n 's/^# targets: //p' "$VM"/groups/*.sh | tr ' ' '\n' | grep . | sort -u)

passed=0 failed=0
result() { echo "vm: ${passed} passed, ${failed} failed"; [ "$failed" = 0 ]; exit $?; }

if ! PREP=$("$VM/prepare.sh"); then
  echo "FAIL vm-prepare: tests/vm/prepare.sh failed (root, apt, kernel download)"
  failed=1; result
fi
export USCM_VM_PREP=$PREP

if [ -z "${USCM_VM_BIN:-}" ] && [ ${#TARGETS[@]} -gt 0 ]; then
  # shellcheck disable=SC2086
  # --keep_going: one group's broken target must not stop the others (its own checks fail)
  if ! ${BAZEL:-bazel} build --keep_going ${USCM_VM_BAZEL_FLAGS:-} "${TARGETS[@]}"; then
    echo "FAIL vm-build: bazel build ${TARGETS[*]}"; failed=1
  fi
  # shellcheck disable=SC2086
  USCM_VM_BIN=$(${BAZEL:-bazel} info ${USCM_VM_BAZEL_FLAGS:-} bazel-bin 2>/dev/null)
fi
export USCM_VM_BIN=${USCM_VM_BIN:-$PWD/bazel-bin}

LOGS=${USCM_VM_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/uscm-vm-logs.XXXXXX")}
mkdir -p "$LOGS"

# run_group NAME: runs groups/NAME.sh (once more when no check ran: a boot lost on a
# loaded host) and writes what the lane prints for it to $LOGS/NAME.out, then its
# counts "P F" to $LOGS/NAME.count (last: the count file says the group is done).
run_group() {
  local name=$1 g="$VM/groups/$1.sh" t0=$EPOCHREALTIME attempt rc lines missing role secs p f
  exec > "$LOGS/$name.out" 2>&1
  echo "=== vm group $name ==="
  for attempt in 1 2; do
    "$g" > "$LOGS/$name.log" 2>&1; rc=$?
    # checks print PASS/FAIL at the start of a line (pair groups: after "[a] ")
    lines=$(grep -E '^(\[[ab]\] )?(PASS|FAIL) ' "$LOGS/$name.log" | sed -E 's/^\[([ab])\] (PASS|FAIL) /\2 \1:/')
    # No check at all: the VM(s) never reached the checks (a boot lost on a loaded
    # host). In a pair, both VMs must show theirs: a VM's serial console can be lost
    # although it ran (seen: b "rc 0" and none of its 23 lines). Run the group once
    # more; a second time it is a failure.
    missing=
    if grep -q '^\[b\] boot.sh:' "$LOGS/$name.log"; then
      for role in a b; do grep -q "^[A-Z]* $role:" <<<"$lines" || missing+=" $role"; done
    fi
    [ -n "$missing" ] && [ "$attempt" = 1 ] && lines=
    [ -n "$lines" ] && break
    echo "note: $name ran no check${missing:+ in VM$missing} (exit $rc); last lines of its log:"
    tail -n 15 "$LOGS/$name.log" | sed 's/^/  | /'
  done
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  p=$(grep -c '^PASS ' <<<"$lines"); f=$(grep -c '^FAIL ' <<<"$lines")
  [ -n "$lines" ] && printf '%s\n' "$lines"
  if [ -z "$lines" ]; then
    echo "FAIL $name: no check ran, twice (log: $LOGS/$name.log)"; f=1
  elif [ -n "$missing" ]; then
    echo "FAIL $name: VM$missing printed no check, twice (log: $LOGS/$name.log)"; f=$((f + 1))
  elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    echo "FAIL $name: the group ended with status $rc (log: $LOGS/$name.log)"; f=1
    tail -n 25 "$LOGS/$name.log" | sed 's/^/  | /'
  elif [ "$f" != 0 ]; then
    grep -E '^(\[[ab]\] )?  \| ' "$LOGS/$name.log" | tail -n 40
  fi
  echo "--- $name: $p passed, $f failed, ${secs}s"
  echo "$p $f" > "$LOGS/$name.count"
}

GROUPS_TO_RUN=()
for g in "$VM"/groups/*.sh; do
  [ -x "$g" ] || continue
  name=$(basename "$g" .sh)
  if [ $# -gt 0 ]; then
    want=0; for f in "$@"; do [[ $name == *"$f"* ]] && want=1; done
    [ "$want" = 1 ] || continue
  fi
  GROUPS_TO_RUN+=("$name")
done

# USCM_VM_JOBS groups at a time (default 2). A TCG VM is one host thread, and a group's
# VMs wait on their guests part of the time (boots, timers, the peer): one group at a
# time kept 2 cores ~73 % busy (60-dropin-vlan, 61-dropin-programs, 63-dropin-own-port:
# 405 s user + 34 s sys in 302 s, 2026-11-28). Groups share nothing on the host: each
# pair picks a free loopback port, each VM has its own overlay, sync and log files.
# Results are printed in the groups' order as they end.
JOBS=${USCM_VM_JOBS:-2}
shown=0
show_ended() {
  local name p f
  while [ "$shown" -lt ${#GROUPS_TO_RUN[@]} ]; do
    name=${GROUPS_TO_RUN[$shown]}
    [ -f "$LOGS/$name.count" ] || break
    cat "$LOGS/$name.out"
    read -r p f < "$LOGS/$name.count"
    passed=$((passed + p)); failed=$((failed + f))
    shown=$((shown + 1))
  done
}
rm -f "$LOGS"/*.count
for name in "${GROUPS_TO_RUN[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; show_ended; done
  run_group "$name" &
done
wait
show_ended
[ -n "${USCM_VM_LOGS:-}" ] || rm -rf "$LOGS"
result
