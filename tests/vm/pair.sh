#!/usr/bin/env bash
# tests/vm/pair.sh - two VMs (boot.sh --nic) linked by one Ethernet link that reaches
# only each other, one Soft-RoCE device rxe0 in each, one command in each.
#
#   VM a  rxe0 -- eth 192.168.78.1  (qemu listens on 127.0.0.1:PORT)
#   VM b  rxe0 -- eth 192.168.78.2  (qemu connects)
#
# usage: tests/vm/pair.sh [options] [--] 'COMMAND FOR A' 'COMMAND FOR B'
#   --cm-a, --cm-b     load the kernel CM in that VM
#   --env N=V          to both; --env-a / --env-b to one (repeatable)
#   --timeout S        per VM (default 300)     --grace S  after the first VM ended, give
#                      the other S seconds (default 60), then stop it (status 124)
#   --out DIR          keep DIR/a, DIR/b (console.log, output, rc)  --capture FILE (pcap)
# In both commands: USCM_VM_ROLE=a|b, USCM_VM_IP, USCM_VM_PEER_IP, and tests/vm/sync.sh
# (signal/wait/put/get over a shared host directory, never over the link under test).
# Exit status: a's when non-zero, else b's.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
IP_A=192.168.78.1 IP_B=192.168.78.2
ARGS=() ARGS_A=() ARGS_B=() TIMEOUT=300 GRACE=60 OUT="" CAPTURE=""
while [ $# -gt 0 ]; do
  case $1 in
    --cm-a) ARGS_A+=(--cm); shift ;;
    --cm-b) ARGS_B+=(--cm); shift ;;
    --env) ARGS+=(--env "$2"); shift 2 ;;
    --env-a) ARGS_A+=(--env "$2"); shift 2 ;;
    --env-b) ARGS_B+=(--env "$2"); shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --grace) GRACE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --capture) CAPTURE=$2; shift 2 ;;
    --mem|--smp|--accel) ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "pair.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# = 2 ] || { echo "usage: pair.sh [options] 'command for a' 'command for b'" >&2; exit 2; }

USCM_VM_PREP=$("$HERE/prepare.sh"); export USCM_VM_PREP
if [ -n "$OUT" ]; then mkdir -p "$OUT"; RUN=$(cd "$OUT" && pwd -P); rm -rf "$RUN"/{a,b,sync}
else RUN=$(mktemp -d "${TMPDIR:-/tmp}/uscm-vm-pair.XXXXXX"); fi
mkdir -p "$RUN/a" "$RUN/b" "$RUN/sync"

PID_A="" PID_B=""
stop_all() {
  local p
  for p in $PID_A $PID_B; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $PID_A $PID_B; do wait "$p" 2>/dev/null || true; done
  [ -n "$OUT" ] || rm -rf "$RUN"
}
trap stop_all EXIT
trap 'exit 143' TERM INT HUP

listening() { [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; }
in_use() { [ -n "$(ss -Htan "( sport = :$1 or dport = :$1 )" 2>/dev/null)" ]; }

vm() { # role ip mac nic cmd [args]
  local role=$1 ip=$2 mac=$3 nic=$4 cmd=$5 peer=$IP_A; shift 5
  [ "$role" = b ] || peer=$IP_B
  "$HERE/boot.sh" --name "uscm-vm-$role" --prefix "[$role] " --out "$RUN/$role" \
    --nic "$nic" --mac "$mac" --ip "$ip" --sync "$RUN/sync" --timeout "$TIMEOUT" \
    --env "USCM_VM_ROLE=$role" --env "USCM_VM_PEER_IP=$peer" \
    --env "PATH=$HERE:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    ${CAPTURE:+$([ "$role" = a ] && echo --capture "$CAPTURE")} \
    "${ARGS[@]+"${ARGS[@]}"}" "$@" -- "$cmd" &
}

# a's qemu must listen before b's connects; if the port got taken meanwhile, a fails
# at once and another port is tried
for try in 1 2 3; do
  for _ in $(seq 50); do PORT=$((20000 + RANDOM % 30000)); in_use "$PORT" || break; done
  vm a "$IP_A" 52:54:00:55:00:01 "listen:$PORT" "$1" "${ARGS_A[@]+"${ARGS_A[@]}"}"; PID_A=$!
  for _ in $(seq 600); do   # 60 s: a loaded host can be slow to start qemu
    listening "$PORT" && break
    kill -0 "$PID_A" 2>/dev/null || break
    sleep 0.1
  done
  listening "$PORT" && break
  kill -TERM "$PID_A" 2>/dev/null || true; wait "$PID_A" 2>/dev/null || true; PID_A=""
  echo "pair.sh: VM a did not listen on port $PORT (try $try)" >&2
done
[ -n "$PID_A" ] || { echo "pair.sh: VM a did not start" >&2; exit 125; }
vm b "$IP_B" 52:54:00:55:00:02 "connect:$PORT" "$2" "${ARGS_B[@]+"${ARGS_B[@]}"}"; PID_B=$!

declare -A RC
set +e
wait -n -p first "$PID_A" "$PID_B"; rc=$?
if [ "$first" = "$PID_A" ]; then RC[a]=$rc; f=a o=b opid=$PID_B; else RC[b]=$rc; f=b o=a opid=$PID_A; fi
: > "$RUN/sync/ended-$f"   # a wait in the other VM fails at once now
for _ in $(seq $((GRACE * 10))); do kill -0 "$opid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$opid" 2>/dev/null; then
  echo "pair.sh: VM $o still runs ${GRACE}s after VM $f ended: stopping it" >&2
  kill -TERM "$opid"; wait "$opid"; RC[$o]=124
else
  wait "$opid"; RC[$o]=$?
fi
set -e
PID_A="" PID_B=""
echo "pair.sh: rc a=${RC[a]} b=${RC[b]}" >&2
[ "${RC[a]}" = 0 ] || exit "${RC[a]}"
exit "${RC[b]}"
