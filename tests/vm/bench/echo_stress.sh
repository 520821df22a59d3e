#!/usr/bin/env bash
# tests/vm/bench/echo_stress.sh [PROG...]: many short echoed connections in ONE VM boot
# (rxe0 192.168.77.1 <-veth-> rxe1 192.168.77.2), to count how often the data path of a
# connection's end goes wrong (docs/VM.md "Writing a group": the last SEND). Per PROG (a
# tests/vm/behaviour/gid_moved binary; default the one in $USCM_VM_BIN, so an old build
# and a new one run side by side) and per CM (the kernel's with Debian's librdmacm, then,
# with rdma_ucm / rdma_cm / ib_cm unloaded, uscm through `uscm exec`): one server
# (`gid_moved -s`, 2 x ECHO_N connections) and ECHO_N clients (`gid_moved -c`, two
# connections each), one after the other. Prints per round the server's exit status,
# the connections served, its "no completion" and "not acknowledged" lines, the clients'
# echoes, each client that took 4 s or more or lost an echo (with its output), and the
# rxe counters (`rdma statistic show link`: completer_retry_err counts RC retries).
# ECHO_N: clients per round (default 40). A bench, not a test. Run from the repository:
#   bazel build //tests/vm/behaviour:gid_moved //api/librdmacm:librdmacm.so.1 \
#     //tools:uscmd //tools:uscm && tests/vm/bench/echo_stress.sh
. "$(dirname "$0")/../lib.sh"
if ! in_vm; then
  PROGS=()
  for p in "${@:-$USCM_VM_BIN/tests/vm/behaviour/gid_moved}"; do PROGS+=("$(readlink -f "$p")"); done
  echo "host load before: $(uptime)"
  "$VM_DIR/boot.sh" --timeout 3000 --env "USCM_VM_BIN=$USCM_VM_BIN" \
    --env "ECHO_PROGS=${PROGS[*]}" --env "ECHO_N=${ECHO_N:-40}" -- "bash $(readlink -f "$0")"
  rc=$?
  echo "host load after: $(uptime)"
  exit $rc
fi

S=192.168.77.1 C=192.168.77.2 N=${ECHO_N:-40}
counters() {
  rdma statistic show link "$1/1" |
    grep -o 'sent_pkts [0-9]*\|rcvd_pkts [0-9]*\|completer_retry_err [0-9]*' | tr '\n' ' '
}
# round CM PROG PORT: one server, N clients of two connections each
round() {
  local cm=$1 prog=$2 port=$3 run=(timeout 1200) server i t0 slow=0
  local tag=$cm-$port log=/tmp/$cm-$port-server.log
  [ "$cm" = uscm ] && run=(env USCM_DEBUG=1 timeout 1200 "$USCM_VM_BIN/tools/uscm" exec --)
  echo "== $tag ($prog) before: rxe0 $(counters rxe0)| rxe1 $(counters rxe1)"
  "${run[@]}" "$prog" -s $S "$port" $((2 * N)) > "$log" 2>&1 & server=$!
  wait_for "$log" '^listening' $server > /dev/null || { echo "$tag: no server"; return 1; }
  for i in $(seq "$N"); do
    t0=$SECONDS
    echo go | "${run[@]}" "$prog" -c $C $S "$port" > "/tmp/$tag-c$i.out" 2>&1
    if [ $((SECONDS - t0)) -ge 4 ] || [ "$(grep -c 'echo ok' "/tmp/$tag-c$i.out")" != 2 ]; then
      slow=$((slow + 1))
      echo "-- $tag client $i took $((SECONDS - t0)) s; rxe0 $(counters rxe0)| rxe1 $(counters rxe1)"
      grep -v ': rc 0 errno -\|status 0$' "/tmp/$tag-c$i.out" | sed 's/^/   | /'
    fi
  done
  wait $server; echo "$tag server exit $?"
  echo "$tag served $(grep -c '^served' "$log") of $((2 * N)); no completion" \
    "$(grep -c 'no completion' "$log"); not acknowledged $(grep -c 'not acknowledged' "$log");" \
    "echo ok $(cat /tmp/$tag-c*.out | grep -c 'echo ok'); clients slow or failed $slow"
  echo "== $tag after: rxe0 $(counters rxe0)| rxe1 $(counters rxe1)"
}
port=7500
for prog in $ECHO_PROGS; do round kernel "$prog" $((port++)); done
modprobe -r rdma_ucm rdma_cm ib_cm
for prog in $ECHO_PROGS; do round uscm "$prog" $((port++)); done
