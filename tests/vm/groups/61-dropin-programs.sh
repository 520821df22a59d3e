#!/usr/bin/env bash
# More of Debian's unmodified rdma_cm programs on uscm's drop-in librdmacm.so.1 (issue 13),
# each drop-in side run through `uscm exec` (which starts uscmd for rxe0 on demand).
# Two linked VMs: a runs the kernel CM and the system's librdmacm; b has no ib_cm,
# rdma_cm, rdma_ucm (asserted).
#   1. udaddy (RDMA_PS_UDP: SIDR REQ/REP, then 10 UD sends each way): kernel server <-
#      drop-in client, then drop-in server <- kernel client (udaddy's port is always 7174)
#   2. ib_send_bw -R (perftest; rdma_cm connects the QPs, 100 x 64 KiB sends), R runs
#      per role: kernel server <- drop-in client, then drop-in server <- kernel client.
#      R > 1 because its teardown crashed the drop-in in about one run of two (a DREQ
#      moved the QP perftest had destroyed to ERROR; docs/API.md): one run would miss it.
#      A run whose data connection was refused (REJ 8, below) runs once more: set-up.
#      Then ib_read_bw -R and ib_write_bw -R, one run per role: RDMA READ needs the
#      depths the CM carried (the REQ's responder resources / initiator depth, moved
#      into max_dest_rd_atomic / max_rd_atomic by rdma_init_qp_attr on both ends): a
#      responder QP left at 0 fails the first read with a remote access error.
#   3. ucmatose -c 10 (10 RC connections, 10 x 100 B each way on each): both ways
# Checked: every program exits 0, udaddy / ucmatose print "data transfers complete"
# and "return status 0" and no "failing connection request"; perftest prints its result line.
# Readiness: the kernel listener shows in `rdma resource show cm_id`; the drop-in says
# "listening on" (USCM_DEBUG=1).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 600
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
C=10   # ucmatose connections
R=3    # ib_send_bw -R runs per role
# run K: ib_send_bw for K <= R, then ib_read_bw, then ib_write_bw
PERF=()
for ((k = 1; k <= R; k++)); do PERF[k]=ib_send_bw; done
PERF[R + 1]=ib_read_bw PERF[R + 2]=ib_write_bw
# perf_name K: the check name's program part (send-bw, read-bw, write-bw)
perf_name() { local p=${PERF[$1]#ib_}; echo "${p//_/-}"; }
# perftest: 100 iterations of its default 64 KiB message; -F: TCG's CPU frequency varies
BW=(-R -F -n 100)
# The result line's shape (the fields are separated by spaces and tabs). Not its
# figures: under TCG at load 15-17 perftest's clock gave "0.00 0.00 0.000000" for
# complete runs, on the kernel's side as on the drop-in's; that every send completed
# is the exit status (perftest fails on a bad completion).
BW_LINE='^ *65536[[:space:]]+100[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+[[:space:]]*$'
# perftest's server listens for the data connection only after a handshake on the
# control connection, on the same port, so a client that connects first gets REJ 8 (no
# listener) - and perftest 4.5's own retry then reuses the ids and channel it destroyed
# (the drop-in client died of it once in 6 runs at load 14; the kernel server waited
# for its timeout). A refused run never started its transfer: the pair runs it once
# more, on the port + 100 (the client says how it went: bw-outcome-TAG-K-TRY; TAG kbw:
# the kernel serves, dbw: the drop-in serves).
BW_REJ='RDMA_CM_EVENT_REJECTED; error: 8'

# bw_serve TAG NAME K PORT READY CMD...: run K's server (CMD -p PORT, log
# /tmp/bw-s-TAG-K.log; READY PORT LOG waits until it listens): PASS NAME-K on exit 0,
# and its result line.
bw_serve() {
  local tag=$1 name=$2 k=$3 port=$4 ready=$5 try pid log=/tmp/bw-s-$1-$3.log; shift 5
  for try in 1 2; do
    "$@" -p "$port" > "$log" 2>&1 & pid=$!
    "$ready" "$port" "$log" && sync.sh signal "bw-ready-$tag-$k-$try"
    if [ "$(sync.sh get "bw-outcome-$tag-$k-$try" $((2 * T)))" = retry ] && [ $try = 1 ]; then
      kill "$pid"; wait "$pid"; port=$((port + 100)); continue
    fi
    finish "$name-$k" "$pid" "$log"
    has_lines "$name-result-$k" "$log" "$BW_LINE" 1
    return
  done
}
# bw_client TAG NAME K PORT CMD...: K's client (CMD -p PORT PEER, log /tmp/bw-c-TAG-K.log)
bw_client() {
  local tag=$1 name=$2 k=$3 port=$4 try rc log=/tmp/bw-c-$1-$3.log; shift 4
  for try in 1 2; do
    sync.sh wait "bw-ready-$tag-$k-$try" $T
    rc=0; "$@" -p "$port" "$PEER" > "$log" 2>&1 || rc=$?
    if [ $try = 1 ] && grep -q "$BW_REJ" "$log"; then
      echo "note: $name-$k: REJ 8 (the server did not listen yet): once more"
      echo retry | sync.sh put "bw-outcome-$tag-$k-$try"; port=$((port + 100)); continue
    fi
    echo done | sync.sh put "bw-outcome-$tag-$k-$try"
    if [ "$rc" = 0 ]; then pass "$name-$k"; else show "$log"; fail "$name-$k" "exit $rc"; fi
    has_lines "$name-result-$k" "$log" "$BW_LINE" 1
    return
  done
}
kernel_ready() { kernel_listening "$1"; }
dropin_ready() { wait_for "$2" 'listening on'; }
# transfers_ok NAME LOG: udaddy's / ucmatose's end: every connection's messages polled
# (both programs wait for all of them before saying so) and "return status 0". A
# server that failed a connection request skips that connection's data and still
# says both, so no "failing connection request" / "failure ..." line either.
transfers_ok() {
  has_lines "$1-data" "$2" '^data transfers complete$' 1
  has_lines "$1-status" "$2" '^return status 0$' 1
  has_lines "$1-no-failure" "$2" '^(udaddy|cmatose): fail' 0
}

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules

  # 1. udaddy
  timeout $T udaddy -b "$IP" > /tmp/udaddy-s.log 2>&1 & pid=$!
  kernel_listening 7174 && sync.sh signal kernel-udaddy-ready
  finish kernel-udaddy-served-dropin "$pid" /tmp/udaddy-s.log
  transfers_ok kernel-udaddy-server /tmp/udaddy-s.log
  sync.sh wait dropin-udaddy-ready $T
  run_to kernel-udaddy-to-dropin /tmp/udaddy-c.log timeout $T udaddy -s "$PEER" -b "$IP"
  transfers_ok kernel-udaddy-client /tmp/udaddy-c.log

  # 2. perftest -R: run k on port 18514+k (kernel server), 18524+k (drop-in server)
  for k in "${!PERF[@]}"; do
    bw_serve kbw "kernel-$(perf_name $k)-served-dropin" $k $((18514 + k)) kernel_ready \
      timeout $T "${PERF[k]}" "${BW[@]}"
  done
  for k in "${!PERF[@]}"; do
    bw_client dbw "kernel-$(perf_name $k)-to-dropin" $k $((18524 + k)) \
      timeout $T "${PERF[k]}" "${BW[@]}"
  done

  # 3. ucmatose -c 10
  timeout $T ucmatose -b "$IP" -p 7473 -c $C > /tmp/ucmatose-s.log 2>&1 & pid=$!
  kernel_listening 7473 && sync.sh signal kernel-ucmatose-ready
  finish kernel-ucmatose-served-dropin "$pid" /tmp/ucmatose-s.log
  transfers_ok kernel-ucmatose-server /tmp/ucmatose-s.log
  sync.sh wait dropin-ucmatose-ready $T
  run_to kernel-ucmatose-to-dropin /tmp/ucmatose-c.log \
    timeout $T ucmatose -s "$PEER" -b "$IP" -p 7474 -c $C
  transfers_ok kernel-ucmatose-client /tmp/ucmatose-c.log
  # b checks this too: a's console lines can be lost (seen once), b's FAIL is not
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  no_kernel_cm no-kernel-cm-b

  # 1. udaddy
  sync.sh wait kernel-udaddy-ready $T
  run_to dropin-udaddy-to-kernel /tmp/udaddy-c.log "${USCM[@]}" udaddy -s "$PEER" -b "$IP"
  transfers_ok dropin-udaddy-client /tmp/udaddy-c.log
  "${USCM[@]}" udaddy -b "$IP" > /tmp/udaddy-s.log 2>&1 & pid=$!
  wait_for /tmp/udaddy-s.log 'listening on' && sync.sh signal dropin-udaddy-ready
  finish dropin-udaddy-served-kernel "$pid" /tmp/udaddy-s.log
  transfers_ok dropin-udaddy-server /tmp/udaddy-s.log

  # 2. perftest -R (each run's exit status is where ib_send_bw's teardown crash showed)
  for k in "${!PERF[@]}"; do
    bw_client kbw "dropin-$(perf_name $k)-to-kernel" $k $((18514 + k)) \
      "${USCM[@]}" "${PERF[k]}" "${BW[@]}"
  done
  for k in "${!PERF[@]}"; do
    bw_serve dbw "dropin-$(perf_name $k)-served-kernel" $k $((18524 + k)) dropin_ready \
      "${USCM[@]}" "${PERF[k]}" "${BW[@]}"
  done

  # 3. ucmatose -c 10
  sync.sh wait kernel-ucmatose-ready $T
  run_to dropin-ucmatose-to-kernel /tmp/ucmatose-c.log \
    "${USCM[@]}" ucmatose -s "$PEER" -b "$IP" -p 7473 -c $C
  transfers_ok dropin-ucmatose-client /tmp/ucmatose-c.log
  "${USCM[@]}" ucmatose -b "$IP" -p 7474 -c $C > /tmp/ucmatose-s.log 2>&1 & pid=$!
  wait_for /tmp/ucmatose-s.log 'listening on' && sync.sh signal dropin-ucmatose-ready
  finish dropin-ucmatose-served-kernel "$pid" /tmp/ucmatose-s.log
  transfers_ok dropin-ucmatose-server /tmp/ucmatose-s.log

  # every drop-in program above went through the uscmd that the first uscm exec started
  check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
