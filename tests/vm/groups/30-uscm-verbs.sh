#!/usr/bin/env bash
# targets: //tests/vm:uscm_peer
# uscm on real verbs, both ends uscm: server on rxe0 (192.168.77.1), client on rxe1
# (192.168.77.2), RoCE v2 over the veth. CM MADs first through the umad transport (QP1),
# then through the verbs UD transport (each peer's own UD QP, Q_Key 0x11111).
. "$(dirname "$0")/../lib.sh"
vm_boot

PEER=$USCM_VM_BIN/tests/vm/uscm_peer
T=${TMPDIR:-/tmp}/uscm-umad; mkdir -p "$T"
run_pair() { # TRANSPORT [extra client args]
  local tr=$1; shift
  rm -f "$T"/*
  "$PEER" --role server --transport "$tr" --device rxe0 --ip 192.168.77.1 --port 7471 \
    --ready-file "$T/ready" --qpn-file "$T/qpn" > "$T/server.out" 2>&1 & local s=$!
  for _ in $(seq 600); do [ -e "$T/ready" ] || ! kill -0 $s 2>/dev/null && break; sleep 0.05; done
  local peer_args=()
  [ "$tr" = ud ] && [ -s "$T/qpn" ] && peer_args=(--peer-ud-qpn "$(cat "$T/qpn")")
  "$PEER" --role client --transport "$tr" --device rxe1 --ip 192.168.77.2 \
    --peer-ip 192.168.77.1 --port 7471 "${peer_args[@]}" "$@" > "$T/client.out" 2>&1
  echo $? > "$T/client.rc"
  wait $s; echo $? > "$T/server.rc"
  sed 's/^/  server| /' "$T/server.out"; sed 's/^/  client| /' "$T/client.out"
}
# saw SIDE REGEX: the side's output has a line matching REGEX
saw() { grep -Eq "$2" "$T/$1.out"; }
expect() { # NAME SIDE REGEX
  if saw "$2" "$3"; then pass "$1"; else
    fail "$1" "$2 did not print /$3/; last: $(grep -v '^ok' "$T/$2.out" | tail -n 1)"; fi
}

report() { # PREFIX
  local p=$1
  expect "$p-server-listens" server '^ok listening 192.168.77.1:7471'
  expect "$p-connect-established-client" client '^ok established'
  expect "$p-connect-established-server" server '^ok established'
  expect "$p-rc-qp-rts-client" client '^ok qp-rts'
  expect "$p-rc-qp-rts-server" server '^ok qp-rts'
  expect "$p-rdma-write-byte-for-byte" server '^ok rdma-write bytes=4096'
  expect "$p-send-recv-byte-for-byte" server '^ok send-recv bytes=4096'
  expect "$p-reply-byte-for-byte" client '^ok reply-recv bytes=4096'
  expect "$p-disconnect-client" client '^ok disconnected'
  expect "$p-disconnect-server" server '^ok disconnected'
  if [ "$(cat "$T/client.rc")" = 0 ] && [ "$(cat "$T/server.rc")" = 0 ]; then pass "$p-both-exit-0"
  else fail "$p-both-exit-0" "client rc $(cat "$T/client.rc"), server rc $(cat "$T/server.rc")"; fi
}

run_pair umad
report umad
# the CM sent to the IPv4-mapped GID: the source GID index had to be moved to 1
expect umad-roce-sgid-index client '^ok counters sgid_fixed=[1-9]'

run_pair ud
report ud
expect ud-transport-server server '^ok transport ud qpn=[0-9]+'
# the client's REQ/RTU/DREQ went to the server's UD QP instead of QP1
expect ud-qp1-redirected client '^ok counters sgid_fixed=[0-9]+ redirected=[1-9]'
group_end
