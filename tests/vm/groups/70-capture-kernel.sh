#!/usr/bin/env bash
# Captures of the kernel CM on RoCE v2, decoded by `uscm dump` and by tshark, compared
# field for field (issue 15). Two linked VMs, both with the kernel CM: b's rping -c and
# ucmatose client connect to a's rping -s and ucmatose server (REQ, REP, RTU, data, DREQ,
# DREP). The link is recorded twice, independently:
#   link.pcap    qemu's filter-dump on a's netdev (pcap, microseconds), on the host;
#   link.pcapng  dumpcap in VM a on the RoCE netdev (pcapng, its own SHB / IDB / EPB).
# After the pair ends, on the host: `uscm dump --verbose` of each file, and
# //tests/wire:dump_vs_tshark compares every MAD it prints with tshark's decode of the
# same file (every field tshark decodes, and MAD bytes 24..255 as bytes), counts them,
# and fails when a REQ, REP, RTU, DREQ or DREP is missing. Both files must hold the same
# MADs in the same order.
# targets: //tools:uscm //tests/wire:dump_vs_tshark
. "$(dirname "$0")/../lib.sh"
T=120   # seconds for any one step: TCG guests on a loaded 2-core host are slow

if ! in_vm; then
  RUN=$(mktemp -d "${TMPDIR:-/tmp}/uscm-vm-capture.XXXXXX")
  [ -n "${USCM_VM_KEEP_CAPTURE:-}" ] || trap 'rm -rf "$RUN"' EXIT
  "$VM_DIR/pair.sh" --cm-a --cm-b --env "USCM_VM_BIN=$USCM_VM_BIN" --out "$RUN/vms" \
    --capture "$RUN/link.pcap" -- "bash $(readlink -f "$0")" "bash $(readlink -f "$0")"
  rc=$?
  # The VMs' own FAIL lines (if any) are above; with none at all (a boot lost on a
  # loaded host) tests/vm/run.sh runs the group once more. Nothing to compare either way.
  [ "$rc" = 0 ] || exit "$rc"
  cp "$RUN/vms/a/link.pcapng" "$RUN/link.pcapng" 2>/dev/null
  check_output capture-pcap-written 'a1 b2 c3 d4|d4 c3 b2 a1' od -An -tx1 -N4 "$RUN/link.pcap"
  check_output capture-pcapng-written '0a 0d 0d 0a' od -An -tx1 -N4 "$RUN/link.pcapng"
  for f in link.pcap link.pcapng; do
    check "uscm-dump-$f" bash -c "'$USCM_VM_BIN/tools/uscm' dump --verbose '$RUN/$f' \
      > '$RUN/$f.dump' && tail -n 2 '$RUN/$f.dump'"
    printf '%s\n' "$OUT" | sed 's/^/  = /'
    check "dump-agrees-with-tshark-$f" "$USCM_VM_BIN/tests/wire/dump_vs_tshark" \
      "$RUN/$f" "$RUN/$f.dump" --require=REQ,REP,RTU,DREQ,DREP
    printf '%s\n' "$OUT" | head -n 1 | sed 's/^/  = /'
  done
  # the MAD lines without frame number and time: what crossed the link, in order
  mads() { sed -nE 's/^ *[0-9]+ +[0-9.]+  +([^ ]+ +-> .*)/\1/p' "$1"; }
  mads "$RUN/link.pcap.dump" > "$RUN/pcap.mads"; mads "$RUN/link.pcapng.dump" > "$RUN/pcapng.mads"
  check pcap-and-pcapng-hold-the-same-mads bash -c \
    "[ -s '$RUN/pcap.mads' ] && diff '$RUN/pcap.mads' '$RUN/pcapng.mads'"
  echo "  = $(wc -l < "$RUN/pcap.mads") MADs in each"
  [ -z "${USCM_VM_KEEP_CAPTURE:-}" ] || echo "captures kept in $RUN"
  group_end
fi

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP

# finish NAME PID LOG REGEX: PASS when the background program exits 0 and printed REGEX
finish() {
  local name=$1 pid=$2 log=$3 re=$4 rc=0
  wait "$pid" || rc=$?
  if [ "$rc" = 0 ] && grep -Eq -- "$re" "$log"; then pass "$name"; else
    sed 's/^/  | /' "$log" | tail -n 30
    fail "$name" "exit $rc: $(grep -v '^ *$' "$log" | tail -n 1)"
  fi
}

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw ib_cm /proc/modules
  netdev=$(rdma link show rxe0/1 | sed -nE 's/.* netdev ([^ ]+).*/\1/p')
  dumpcap -i "$netdev" -f 'udp port 4791' -w /tmp/link.pcapng > /tmp/dumpcap.log 2>&1 &
  dumpcap_pid=$!
  check dumpcap-capturing wait_for /tmp/dumpcap.log "Capturing on"

  timeout $T rping -s -a "$IP" -p 7174 -v -C 3 > /tmp/rping-s.log 2>&1 & pid=$!
  kernel_listening 7174 && sync.sh signal rping-ready
  finish rping-s-served "$pid" /tmp/rping-s.log 'server ping data: rdma-ping-2: '

  timeout $T ucmatose -b "$IP" -p 7471 > /tmp/ucmatose-s.log 2>&1 & pid=$!
  kernel_listening 7471 && sync.sh signal ucmatose-ready
  finish ucmatose-s-served "$pid" /tmp/ucmatose-s.log '^test complete'

  sync.sh wait b-done $T
  kill -INT "$dumpcap_pid"; wait "$dumpcap_pid"
  check dumpcap-stopped bash -c 'cat /tmp/dumpcap.log; cp /tmp/link.pcapng /xfer/link.pcapng'
  printf '%s\n' "$OUT" | grep -E 'Packets' | sed 's/^/  = /'
else
  check kernel-cm-loaded-b grep -qw ib_cm /proc/modules
  sync.sh wait rping-ready $T
  check rping-c bash -c "timeout $T rping -c -a $PEER -I $IP -p 7174 -v -C 3 && echo done"
  sync.sh wait ucmatose-ready $T
  check_output ucmatose-c 'return status 0' timeout $T ucmatose -s "$PEER" -b "$IP" -p 7471
  sync.sh signal b-done
fi
group_end
