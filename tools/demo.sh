#!/usr/bin/env bash
# The main job: installs what it needs, builds the uscm command, runs its demo
# (on the simulated fabric unless told otherwise). Arguments go to `uscm demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel build -c opt //tools:uscm >&2
exec bazel-bin/tools/uscm demo "$@"
