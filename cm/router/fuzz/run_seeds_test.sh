#!/bin/bash
# Runs a fuzz target's plain build over its built-in seeds and a few frames.
set -euo pipefail
"$1" | grep -q "inputs ok"
