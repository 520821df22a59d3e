#!/usr/bin/env bash
# The main job: installs what it needs, builds the uscm command, runs its demo
# (on the simulated fabric unless told otherwise). Arguments go to `uscm demo`.
# apt and Bazel write to logs in $USCM_LOG_DIR (default /tmp/uscm-logs); a failing
# step prints the end of its log.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
source tools/quiet.sh
quiet_step "$USCM_LOG_DIR/build.log" "demo: bazel build -c opt //tools:uscm" \
  bazel build -c opt //tools:uscm || exit 1
exec bazel-bin/tools/uscm demo "$@"
