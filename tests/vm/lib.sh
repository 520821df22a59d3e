# tests/vm/lib.sh - sourced by the check groups (tests/vm/groups/*.sh), on the host and
# inside the VM. A group is one executable file = one VM boot (or one pair boot). Run on
# the host, it boots its VM(s) with itself as the command (`vm_boot`/`vm_pair`); inside,
# it runs its checks, each printing exactly one line "PASS name" or "FAIL name: why".
# tests/vm/run.sh counts those lines.
#
# Inside the VM: USCM_VM_LINK is set; USCM_VM_BIN is the bazel-bin directory that
# tests/vm/run.sh built (the host's tree, seen read-only through 9p).

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
: "${USCM_VM_BIN:=$VM_DIR/../../bazel-bin}"
export USCM_VM_BIN

in_vm() { [ -n "${USCM_VM_LINK:-}" ]; }

# vm_boot [boot.sh options]: re-run this group inside one VM.
vm_boot() {
  in_vm && return 0
  "$VM_DIR/boot.sh" --env "USCM_VM_BIN=$USCM_VM_BIN" --env "USCM_VM_GROUP_LOG=/tmp/group-log" \
    "$@" -- "bash $(readlink -f "$0")"
  exit $?
}

# vm_pair [pair.sh options]: re-run this group in two linked VMs (USCM_VM_ROLE a / b).
vm_pair() {
  in_vm && return 0
  "$VM_DIR/pair.sh" --env "USCM_VM_BIN=$USCM_VM_BIN" "$@" -- \
    "bash $(readlink -f "$0")" "bash $(readlink -f "$0")"
  exit $?
}

FAILED=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; FAILED=1; }

# check NAME COMMAND...: PASS when COMMAND exits 0; else FAIL with its last output line.
# The command's output is kept in $OUT (and shown on failure).
check() {
  local name=$1; shift
  OUT=$("$@" 2>&1); local rc=$?
  if [ "$rc" = 0 ]; then pass "$name"; else
    printf '%s\n' "$OUT" | sed 's/^/  | /' | tail -n 30
    fail "$name" "exit $rc: $(printf '%s\n' "$OUT" | grep -v '^ *$' | tail -n 1)"
  fi
}

# check_output NAME REGEX COMMAND...: PASS when the output matches REGEX (grep -E),
# whatever the exit status (for commands that are expected to fail).
check_output() {
  local name=$1 re=$2; shift 2
  OUT=$("$@" 2>&1); local rc=$?
  if printf '%s\n' "$OUT" | grep -Eq -- "$re"; then
    printf '  = %s\n' "$(printf '%s\n' "$OUT" | grep -Em1 -- "$re")"   # the message, for the log
    pass "$name"
  else
    printf '%s\n' "$OUT" | sed 's/^/  | /' | tail -n 30
    fail "$name" "exit $rc, output does not match /$re/"
  fi
}

# The waits below are bounded by the clock ($SECONDS), not by a count of turns: under
# TCG one turn (a grep and a sleep, two forks) takes ~0.3 s, not 0.1, so "T * 10
# turns" once let a 400 s bound run for 20 minutes.
# wait_for FILE REGEX [PID]: until a background program printed REGEX (it is ready),
# for at most $T seconds (default 120); gives up at once when PID (the program) has
# exited without printing it.
wait_for() {
  local end=$((SECONDS + ${T:-120}))
  while :; do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
      grep -Eq -- "$2" "$1" 2>/dev/null && return 0
      echo "no /$2/ in $1: pid $3 exited" >&2; cat "$1" >&2; return 1
    fi
    ((SECONDS < end)) || break
    sleep 0.1
  done
  echo "no /$2/ in $1 after ${T:-120}s" >&2; cat "$1" >&2; return 1
}

# kernel_listening PORT: until the kernel rdma_cm has a listener on PORT.
kernel_listening() {
  local end=$((SECONDS + ${T:-120}))
  while :; do
    rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1 " && return 0
    ((SECONDS < end)) || break
    sleep 0.1
  done
  echo "no kernel rdma_cm listener on port $1 after ${T:-120}s" >&2; return 1
}

# stop_pid PID [SECONDS]: SIGTERM, then SIGKILL when PID is still there after SECONDS
# (default 10); reaps it. For a program that serves until killed.
stop_pid() {
  local end=$((SECONDS + ${2:-10}))
  kill "$1" 2>/dev/null
  while kill -0 "$1" 2>/dev/null && ((SECONDS < end)); do sleep 0.1; done
  kill -0 "$1" 2>/dev/null && { echo "pid $1 ignored SIGTERM for ${2:-10}s: SIGKILL" >&2; kill -9 "$1"; }
  wait "$1" 2>/dev/null
  return 0
}

# group_end: the group's exit status (non-zero when any check failed).
group_end() { exit "$FAILED"; }
