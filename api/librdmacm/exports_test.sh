#!/bin/bash
# Compares the exports of the drop-in librdmacm.so.1 ($1) with the system's
# librdmacm.so.1 ($2), failing with what only one side has:
#  - every exported function (objdump -T: defined, global or weak, DF) as
#    "name version-node";
#  - the version nodes the library defines (objdump -p "Version
#    definitions");
#  - nothing else global: no defined global/weak dynamic symbol besides those
#    functions and the version nodes' own *ABS* symbols (which GNU ld emits
#    and LLD does not).
set -euo pipefail

ours="$1"
theirs="$2"

# "name version" per exported function, sorted.
exports() {
  objdump -T "$1" | awk '/^[0-9a-f]+ +[gw] +DF / && $0 !~ /\*UND\*/ { print $NF, $(NF-1) }' |
    sort -u
}

# Defined global or weak dynamic symbols that are neither functions nor a
# version node's *ABS* symbol.
others() {
  objdump -T "$1" |
    awk '/^[0-9a-f]+ +[gw]/ && $0 !~ /\*UND\*/ && $0 !~ / DF / &&
         !($0 ~ /\*ABS\*/ && $NF == $(NF-1)) { print }'
}

# The version nodes the library defines (not the soname's base entry).
nodes() {
  objdump -p "$1" | awk '/^Version definitions:/ { on = 1; next } on && NF == 0 { on = 0 }
                         on && $1 ~ /^[0-9]+$/ && $2 != "0x01" { print $4 }' | sort -u
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

functions="$(wc -l < "$tmp/theirs")"
if [[ "$functions" -lt 60 ]]; then
  echo "FAIL: only $functions exports read from $theirs"
  exit 1
fi

failed=0
if ! compare "$tmp/ours" "$tmp/theirs" "$ours" "$theirs"; then
  echo "FAIL: exported functions differ"
  failed=1
fi
nodes "$ours" > "$tmp/ours_nodes"
nodes "$theirs" > "$tmp/theirs_nodes"
if ! compare "$tmp/ours_nodes" "$tmp/theirs_nodes" "$ours" "$theirs"; then
  echo "FAIL: version definitions differ"
  failed=1
fi
if [[ "$(wc -l < "$tmp/theirs_nodes")" -lt 4 ]]; then
  echo "FAIL: read only $(wc -l < "$tmp/theirs_nodes") version nodes from $theirs"
  failed=1
fi
extra="$(others "$ours")"
if [[ -n "$extra" ]]; then
  printf 'FAIL: other global symbols exported by %s:\n%s\n' "$ours" "$extra"
  failed=1
fi
(( failed )) && exit 1
echo "PASS: ${functions} functions equal (name and version node), version nodes $(tr '\n' ' ' < "$tmp/ours_nodes")equal, nothing else global"
