#!/usr/bin/env bash
# tests/vm/bench/rping_teardown.sh [N]: how often Debian's rping server hits its own
# teardown race (docs/API.md "rping's teardown race": the cm thread's rdma_get_cm_event
# after main destroyed the channel, exit 255 "Bad file descriptor"), on uscm's drop-in
# and on the kernel's librdmacm, in ONE VM boot (rxe0 <-> rxe1 over a veth; docs/VM.md).
# A count, not a test: N pairs (default 50), one at a time, each on a port of its own,
# with the commands of 63-dropin-one-vm; first through `uscm exec` (no kernel CM
# loaded), then uscmd stopped, modprobe rdma_ucm (rdma_cm, ib_cm) and the same N on the
# kernel. Prints a RUN line per pair and per mode the server's exit codes, the
# "Bad file descriptor" lines and the events rping did not expect after DISCONNECTED.
# Run from the repository: bazel build the targets below, then
# tests/vm/bench/rping_teardown.sh [N]   (USCM_VM_BIN as for tests/vm/run.sh).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 1700 --env "RPING_N=${1:-50}"
. "$VM_DIR/dropin.sh"

S=192.168.77.1 C=192.168.77.2 N=${RPING_N:-50}

# one MODE I PORT: a server on rxe0's IP, a client bound to rxe1's, 10 pings
one() {
  local mode=$1 i=$2 port=$3 pfx=() s c
  [ "$mode" = dropin ] && pfx=("${USCM[@]}")
  "${pfx[@]}" rping -s -a $S -p "$port" -v > /tmp/s.log 2>&1 & s=$!
  if [ "$mode" = dropin ]; then wait_for /tmp/s.log 'listening on' > /dev/null 2>&1
  else kernel_listening "$port"; fi
  "${pfx[@]}" rping -c -a $S -I $C -p "$port" -v -C 10 > /tmp/c.log 2>&1; c=$?
  wait $s; s=$?
  echo "$i $s $c" >> "/tmp/sum-$mode"
  { echo "== $mode $i rc $s"; cat /tmp/s.log; } >> "/tmp/all-s-$mode.log"
  echo "RUN $mode $i server $s client $c ebadf $(grep -c 'Bad file descriptor' /tmp/s.log)" \
    "unhandled $(grep -c 'unhandled event' /tmp/s.log)"
}
summary() {
  local f=/tmp/sum-$1 log=/tmp/all-s-$1.log
  echo "$1: $(grep -c . "$f") pairs in $2 s; server exit codes:" \
    "$(awk '{print $2}' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
  echo "$1: 'Bad file descriptor' $(grep -c 'rdma_get_cm_event: Bad file descriptor' "$log")," \
    "'unhandled event' $(grep -c 'unhandled event' "$log");" \
    "client exit codes: $(awk '{print $3}' "$f" | sort | uniq -c | tr -s ' \n' ' ')"
}

t0=$(date +%s)
for ((i = 0; i < N; i++)); do one dropin "$i" $((7300 + i)); done
t1=$(date +%s)
for pid in $(pgrep -f "uscmd --ca"); do kill "$pid"; done
for ((i = 0; i < 100; i++)); do pgrep -f "uscmd --ca" > /dev/null || break; sleep 0.1; done
modprobe -a ib_cm rdma_cm rdma_ucm
for ((i = 0; i < N; i++)); do one kernel "$i" $((7300 + N + i)); done
t2=$(date +%s)
summary dropin $((t1 - t0))
summary kernel $((t2 - t1))
grep -B3 'Bad file descriptor' /tmp/all-s-*.log | head -n 40
