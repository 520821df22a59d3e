#!/usr/bin/env bash
# targets: //tools:uscm
# `uscm ping` on RoCE (Soft-RoCE, one VM): server on rxe0 (192.168.77.1), client on rxe1
# (192.168.77.2). No SA on RoCE: the client builds the path from the server's IPv4-mapped
# --dgid and its own IPv4 GID; RoceAddressing fixes the source GID index. First through
# umad (QP1), then ud (each end's own UD QP, Q_Key 0x11111; the client redirects QP1 to the
# server's UD QPN, which the server prints in its listen line).
. "$(dirname "$0")/../lib.sh"
vm_boot

U=$USCM_VM_BIN/tools/uscm
T=${TMPDIR:-/tmp}/uscm-ping-roce; mkdir -p "$T"
DGID=::ffff:192.168.77.1
run_ping() { # FABRIC-KIND N [extra args for both ends]
  local kind=$1 n=$2; shift 2
  rm -f "$T"/*
  "$U" ping --fabric="$kind:rxe0:1" --role=server -c "$n" "$@" > "$T/server.out" 2>&1 & local s=$!
  for _ in $(seq 600); do grep -q "listening" "$T/server.out" 2>/dev/null || ! kill -0 $s 2>/dev/null && break; sleep 0.05; done
  local extra=()
  if [ "$kind" = ud ]; then
    local qpn; qpn=$(sed -n 's/.* UD QPN \([0-9]*\).*/\1/p' "$T/server.out")
    [ -n "$qpn" ] && extra=(--peer-ud-qpn="$qpn")
  fi
  "$U" ping --fabric="$kind:rxe1:1" --role=client --dgid=$DGID -c "$n" --timeout-ms=10000 \
    "${extra[@]}" "$@" > "$T/client.out" 2>&1
  echo $? > "$T/client.rc"
  # the server ends after N connections ended; do not wait forever if it did not
  for _ in $(seq 200); do kill -0 $s 2>/dev/null || break; sleep 0.05; done
  kill $s 2>/dev/null
  wait $s; echo $? > "$T/server.rc"
  sed 's/^/  server| /' "$T/server.out"; sed 's/^/  client| /' "$T/client.out"
}
expect() { # NAME SIDE REGEX
  if grep -Eq -- "$3" "$T/$2.out"; then pass "$1"; else
    fail "$1" "$2 did not print /$3/; last: $(tail -n 1 "$T/$2.out")"; fi
}
both_exit_0() { # NAME
  if [ "$(cat "$T/client.rc")" = 0 ] && [ "$(cat "$T/server.rc")" = 0 ]; then pass "$1"
  else fail "$1" "client rc $(cat "$T/client.rc"), server rc $(cat "$T/server.rc")"; fi
}

run_ping umad 5 --ece
expect umad-server-listens server "^uscm ping: server listening on rxe0:1 .*RoCE GID $DGID"
expect umad-client-path client '^uscm ping: rxe1:1 LID 65535 -> LID 65535, 5 connections, ECE'
expect umad-client-summary client '^5 established, 0 failed$'
expect umad-client-setup-time client '^setup time \(us, wall clock\): min [0-9.]+  p50 [0-9.]+  p99 [0-9.]+  max [0-9.]+$'
expect umad-client-rate client '^[0-9]+ connections/s \(5 in [0-9.]+ ms, connect \+ disconnect'
expect umad-server-summary server '^server: 5 established, 0 rejected, 5 ended$'
both_exit_0 umad-both-exit-0

run_ping umad 3 --reject
expect umad-reject-client client '^3 rejected as asked, 0 failed$'
expect umad-reject-server server '^server: 0 established, 3 rejected, 3 ended$'
both_exit_0 umad-reject-both-exit-0

run_ping ud 5
expect ud-server-listens server "^uscm ping: server listening on rxe0:1 .*RoCE GID $DGID UD QPN [0-9]+"
expect ud-client-summary client '^5 established, 0 failed$'
expect ud-server-summary server '^server: 5 established, 0 rejected, 5 ended$'
both_exit_0 ud-both-exit-0

# without the server's UD QPN the ud: client says what it needs
check_output ud-client-needs-peer-qpn "needs the server's --peer-ud-qpn=N" \
  "$U" ping --fabric=ud:rxe1:1 --role=client --dgid=$DGID -c 1
check_output roce-client-needs-dgid "RoCE port .*IPv4-mapped --dgid" \
  "$U" ping --fabric=umad:rxe1:1 --role=client --dlid=3 -c 1
group_end
