#!/bin/bash
# router_fuzz_seeds writes its conversations; the router target runs each.
set -euo pipefail
dir="${TEST_TMPDIR:-$(mktemp -d)}/seeds"
"$1" "$dir" | grep -q "^5 seeds written"
"$2" "$dir" | grep -q "^5 inputs ok"
