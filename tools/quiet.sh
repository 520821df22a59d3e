# Sourced by tools/setup.sh, tools/demo.sh and tests/run.sh: a noisy step (apt-get,
# bazel) runs with all its output in a log file; the terminal gets one line for it
# (redrawn with the build's progress when stderr is a terminal) and, if the step
# fails, the last lines of the log. Logs: $USCM_LOG_DIR (default /tmp/uscm-logs).
USCM_LOG_DIR=${USCM_LOG_DIR:-${TMPDIR:-/tmp}/uscm-logs}
mkdir -p "$USCM_LOG_DIR"

# quiet_run LOG WHAT CMD...: runs CMD with stdout and stderr in LOG (overwritten),
# prints "WHAT (log: LOG) ... done, Ns" (or "exit N") on stderr; returns CMD's status.
quiet_run() {
  local log=$1 what=$2 t0=$SECONDS rc=0 pid line room
  shift 2
  local head="${what} (log: ${log}) ..."
  if [[ -t 2 ]]; then
    "$@" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      # bazel's progress lines look like "[123 / 456] Compiling foo.cc; 2s ..."
      line=$(grep -aoE '^\[[0-9,]+ / [0-9,]+\][^;]*' "$log" 2>/dev/null | tail -n 1)
      room=$((${COLUMNS:-100} - ${#head} - 2))
      ((room > 0)) || room=0
      printf '\r\033[K%s %s' "$head" "${line:0:room}" >&2
      sleep 1
    done
    wait "$pid" || rc=$?
    printf '\r\033[K' >&2
  else
    "$@" >"$log" 2>&1 || rc=$?
  fi
  if ((rc == 0)); then
    printf '%s done, %ds\n' "$head" $((SECONDS - t0)) >&2
  else
    printf '%s exit %d after %ds\n' "$head" "$rc" $((SECONDS - t0)) >&2
  fi
  return "$rc"
}

# quiet_tail LOG [N]: the last N (default 30) lines of LOG, indented, on stderr.
quiet_tail() {
  echo "--- last ${2:-30} lines of $1 ---" >&2
  tail -n "${2:-30}" "$1" | sed 's/^/  | /' >&2
}

# quiet_step LOG WHAT CMD...: quiet_run, then the log's tail if CMD failed.
quiet_step() {
  local rc=0
  quiet_run "$@" || rc=$?
  ((rc == 0)) || quiet_tail "$1"
  return "$rc"
}
