#!/bin/bash
# Compares the exports of the drop-in librdmacm.so.1 ($1) with the system's
# librdmacm.so.1 ($2): every defined dynamic symbol (objdump -T, all but
# *UND*) as "name version-node". Fails listing what only one side has.
set -euo pipefail

ours="$1"
theirs="$2"

# "name version" per defined dynamic symbol, sorted.
exports() {
  objdump -T "$1" | awk '/^[0-9a-f]+ / && $0 !~ /\*UND\*/ { print $NF, $(NF-1) }' | sort -u
}

# Prints the differences of two export lists (files); 0 when equal.
compare() {
  local only_a only_b
  only_a="$(comm -23 "$1" "$2")"
  only_b="$(comm -13 "$1" "$2")"
  if [[ -z "$only_a" && -z "$only_b" ]]; then return 0; fi
  [[ -n "$only_a" ]] && printf 'only in %s:\n%s\n' "$3" "$only_a"
  [[ -n "$only_b" ]] && printf 'only in %s:\n%s\n' "$4" "$only_b"
  return 1
}

if [[ ! -f "$theirs" ]]; then
  echo "FAIL: no system librdmacm at $theirs (apt-get install librdmacm1)"
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
exports "$ours" > "$tmp/ours"
exports "$theirs" > "$tmp/theirs"

# The comparison must be able to fail: drop one function of the reference and
# expect it to be reported.
grep -v '^rdma_get_src_port RDMACM_1.0$' "$tmp/theirs" > "$tmp/theirs_minus_one"
if out="$(compare "$tmp/theirs_minus_one" "$tmp/theirs" mutated reference)"; then
  echo "FAIL: self-check: a missing rdma_get_src_port went unnoticed"
  exit 1
fi
if ! grep -q '^rdma_get_src_port RDMACM_1.0$' <<< "$out"; then
  echo "FAIL: self-check did not name rdma_get_src_port: $out"
  exit 1
fi

functions="$(grep -vc '^RDMACM_[0-9.]* RDMACM_' "$tmp/theirs" || true)"
if [[ "$functions" -lt 60 ]]; then
  echo "FAIL: only $functions exports read from $theirs"
  exit 1
fi

if ! compare "$tmp/ours" "$tmp/theirs" "$ours" "$theirs"; then
  echo "FAIL: export lists differ"
  exit 1
fi
echo "PASS: $(wc -l < "$tmp/ours") exports (${functions} functions + version nodes) equal, names and versions"
