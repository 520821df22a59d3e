#!/bin/bash
# tests/vm/sync.sh - inside a VM of pair.sh: named events between the two VMs, as files
# in the shared host directory /sync (9p, no cache). The link under test is not used.
#   sync.sh signal NAME [TEXT]    create NAME
#   sync.sh wait NAME [SECONDS]   wait for NAME (default 120 s); fails at once when the
#                                 other VM's command has ended (pair.sh marks ended-a/b)
#   sync.sh put NAME < data       store stdin as NAME
#   sync.sh get NAME [SECONDS]    wait for NAME and print it
set -u
D=${USCM_VM_SYNC:-/sync}
[ -d "$D" ] || { echo "sync.sh: no $D (not started by pair.sh?)" >&2; exit 2; }
case ${USCM_VM_ROLE:-} in a) peer=b ;; b) peer=a ;; *) peer=none ;; esac
# bounded by the clock, not by a count of turns (a turn under TCG is ~0.3 s, not 0.05)
await() {
  local end=$((SECONDS + ${2:-120}))
  while :; do
    [ -e "$D/$1" ] && return 0
    [ -e "$D/ended-$peer" ] && { echo "sync.sh: VM $peer ended before '$1'" >&2; return 1; }
    ((SECONDS < end)) || break
    sleep 0.05
  done
  echo "sync.sh: no '$1' after ${2:-120}s" >&2; return 1
}
[ -n "${2:-}" ] || { sed -n '2,9p' "$0" >&2; exit 2; }
case $1 in
  signal) printf '%s\n' "${3:-$USCM_VM_ROLE}" > "$D/.$2" && mv "$D/.$2" "$D/$2" ;;
  wait) await "$2" "${3:-120}" ;;
  put) cat > "$D/.$2" && mv "$D/.$2" "$D/$2" ;;
  get) await "$2" "${3:-120}" && cat "$D/$2" ;;
  *) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
