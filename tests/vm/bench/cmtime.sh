#!/usr/bin/env bash
# tests/vm/bench/cmtime.sh [N]: Debian's unmodified cmtime, the kernel CM against uscm's
# drop-in librdmacm.so.1, in ONE VM boot (rxe0 <-> rxe1 over a veth; docs/VM.md).
# A bench, not a test: it prints the step totals side by side (docs/API.md "cmtime").
#   1. no kernel CM loaded: cmtime through `uscm exec` (the drop-in): server and client are
#      two processes on rxe0 through one uscmd (the drop-in serves one port per process;
#      docs/VM.md "60-dropin-rping"); uscmd is started here so that its counters are printed
#   2. uscmd stopped, modprobe rdma_ucm (rdma_cm, ib_cm): the kernel CM, cmtime server on
#      rxe0 (192.168.77.1), client bound to rxe1 (192.168.77.2)
# The drop-in goes first: loading the kernel CM is immediate, while unloading it after a
# killed server waits for its connections to leave (in the old order the drop-in half
# printed nothing for 8+ minutes at -c 100; most likely the unload loop, not traced).
# N connections (default 1000). Run from the repository: bazel build the targets below,
# then tests/vm/bench/cmtime.sh [N]   (USCM_VM_BIN as for tests/vm/run.sh).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
# Measuring where the drop-in's time goes (docs/API.md "Where a connection's time goes"):
#   CMTIME_MEASURE=strace  uscmd, server and client each under `strace -f -c` (syscall
#                          counts per process, all threads; slows every syscall down)
#   CMTIME_MEASURE=trace   each under `strace -f`: the files opened and ioctls, counted
#   CMTIME_MEASURE=record  `perf record -a` over each half (the whole VM, kernel included):
#                          the CPU by process and library, and the top symbols
#   CMTIME_MEASURE=perf    each under `perf stat` (CPU time, context switches, migrations)
#   CMTIME_MEASURE=callers server and client each under `strace -f -k -e trace=CALLS`
#                          (CMTIME_CALLS, default futex; e.g. ioctl,openat): each call
#                          counted by caller (name, op / request / path, the first 3
#                          frames outside libc, libstdc++ and libibverbs: which lock or
#                          query, made where)
#   CMTIME_MEASURE=route   the client under `strace -f -tt`: the syscalls of its resolve-
#                          route step by thread (from the end of the main thread's first
#                          sched_yield run, resolve addr's wait, to the end of its second),
#                          and the main thread's last 16 before the first run (the end of
#                          the resolve-addr calls, and the bind step's before them)
#   CMTIME_MEASURE=calls   the client under `strace -f -tt -T`: the connect and disconnect
#                          steps' calls (the main thread's loop between two sched_yield
#                          runs): frames or ucma writes sent, wall per call, time inside
#                          the send, every thread's syscalls in the loop by name, and
#                          when another thread first sent (the first RTU or ucma write of
#                          a connection's completion). CMTIME_TRACE=CALLS stops only those
#                          (strace --seccomp-bpf -e trace=CALLS; they must include
#                          sched_yield and the sends: sched_yield,sendto,write)
#   CMTIME_MEASURE=callsperf the same windows from `perf record` of the client's sendto,
#                          write and sched_yield tracepoints: nothing stops the program
#                          (strace's stops hand the CPU away at every call on one vCPU),
#                          so the loop's wall per call is the unperturbed one (no time
#                          inside the send)
#   CMTIME_BINS="DIR..."   the drop-in half once per bazel-bin-like DIR (tools/uscm,
#                          tools/uscmd, api/librdmacm/librdmacm.so.1), in this boot: a
#                          before/after pair of the same boot (default: $USCM_VM_BIN)
#   CMTIME_KERNEL=K        K kernel runs after the drop-in half (default 1; 0 skips it)
#   CMTIME_ROUTE_FLOOR=1   before every run and after the last, the resolve-route floor
#                          (tests/vm/bench/route_floor: the event hand-over alone, no CM);
#                          target //tests/vm/bench:route_floor
#   CMTIME_SMP=N           the VM's vCPUs (default 2; under TCG they take turns on one
#                          host thread)
#   CMTIME_CAPTURE=1       uscmd records the wire (--capture); after the half: how many
#                          REQs each connection took, and the MAD timeline of the three
#                          that took most (each MAD twice: uscmd sends it and receives it)
# The drop-in client prints its CM counters at exit (USCM_CM_COUNTERS=1: REQs sent /
# received / retransmitted / duplicates, ...).
#   CMTIME_HOG=K           K busy loops in the VM while each half runs: load on purpose
#                          (the retry storm of a loaded host, without waiting for one)
#   CMTIME_PAIR="P..."     per drop-in run (the last word for the runs after): two puts the
#                          client on rxe1 (-b 192.168.77.2) through a uscmd of its own, as
#                          the kernel half's client, so each uscmd routes one end's MADs;
#                          one (the default) both ends on rxe0 through one uscmd, which
#                          routes every MAD twice; direct: client on rxe1, no uscmd at all
#                          (`uscm exec --no-uscmd`: each process owns its port's umad)
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 1500 --smp "${CMTIME_SMP:-2}" --env "CMTIME_PAIR=${CMTIME_PAIR:-one}" --env "CMTIME_ROUTE_FLOOR=${CMTIME_ROUTE_FLOOR:-0}" --env "CMTIME_N=${1:-1000}" --env "CMTIME_MEASURE=${CMTIME_MEASURE:-}" --env "CMTIME_CALLS=${CMTIME_CALLS:-futex}" --env "CMTIME_TRACE=${CMTIME_TRACE:-}" \
  --env "CMTIME_BINS=${CMTIME_BINS:-}" --env "CMTIME_KERNEL=${CMTIME_KERNEL:-1}" \
  --env "CMTIME_HOG=${CMTIME_HOG:-0}" --env "CMTIME_CAPTURE=${CMTIME_CAPTURE:-0}"

N=${CMTIME_N:-1000}
T=400
A=192.168.77.1 B=192.168.77.2
OUT=/tmp

# measure NAME: the words that put a command under CMTIME_MEASURE's tool (output in
# $OUT/NAME.measure); nothing without one. The tool forks the program: stop_tree stops
# the program first (so the tool writes its summary), then the tool.
measure() {
  case ${CMTIME_MEASURE:-} in
    strace) echo "strace -f -c -o $OUT/$1.measure" ;;
    trace) echo "strace -f -o $OUT/$1.measure" ;;
    perf) echo "perf stat -e task-clock,context-switches,cpu-migrations -o $OUT/$1.measure" ;;
    route) [ "$1" = client ] && echo "strace -f -tt -o $OUT/$1.measure" ;;
    calls) [ "$1" = client ] && echo "strace -f -tt -T ${CMTIME_TRACE:+--seccomp-bpf -e trace=$CMTIME_TRACE} -o $OUT/$1.measure" ;;
    callsperf) [ "$1" = client ] && echo "perf record -q -m 1024 -o $OUT/$1.perfdata -e syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_sched_yield" ;;
    callers) [ "$1" != uscmd ] &&
      echo "strace -f --seccomp-bpf -k -e trace=${CMTIME_CALLS:-futex} -o $OUT/$1.measure" ;;
  esac
}
stop_tree() {
  local c
  for c in $(pgrep -P "$1"); do stop_pid "$c"; done
  stop_pid "$1"
}
# show_capture PCAP: CMTIME_CAPTURE's summary. A connection is named by the active
# side's comm ID: LocalCommID of what it sends (REQ, RTU, DREQ), RemoteCommID of the rest.
show_capture() {
  [ "${CMTIME_CAPTURE:-0}" = 1 ] || return 0
  "$USCM" dump "$1" | awk '$7 == "CM" {
      id = ""; for (f = 9; f <= NF; f++) {
        if ($8 ~ /^(REQ|RTU|DREQ)$/ && $f ~ /^LocalCommID=/) id = substr($f, 13)
        if ($8 !~ /^(REQ|RTU|DREQ)$/ && $f ~ /^RemoteCommID=/) id = substr($f, 14) }
      if (id == "") next
      n[id, $8]++; line[id] = line[id] sprintf(" %s@%.1f", $8, $2); ids[id] = 1 }
    END {
      for (id in ids) { r = n[id, "REQ"] / 2; h[r]++; if (r > best[3]) {
          for (k = 1; k <= 3; k++) if (r > best[k]) { for (j = 3; j > k; j--) {
            best[j] = best[j-1]; who[j] = who[j-1] } best[k] = r; who[k] = id; break } } }
      printf "== REQs per connection (capture):"; for (r in h) printf " %s:%d", r, h[r]; print ""
      for (k = 1; k <= 3; k++) if (who[k] != "") print "== " who[k] " (s since boot):" line[who[k]] }'
}
# hog_start / hog_end: CMTIME_HOG's busy loops (each a shell spinning, niced 0, as a
# program of the host's users would be), around one half.
HOGS=()
hog_start() {
  local k
  for ((k = 0; k < ${CMTIME_HOG:-0}; k++)); do
    bash -c 'while :; do :; done' & HOGS+=($!)
  done
}
hog_end() {
  local p
  for p in "${HOGS[@]}"; do kill "$p"; wait "$p" 2>/dev/null; done
  HOGS=()
}
# record_start / record_end: CMTIME_MEASURE=record's system-wide profile of one half.
record_start() {
  [ "${CMTIME_MEASURE:-}" = record ] || return 0
  perf record -a -q -F 999 -o "$OUT/all.data" > "$OUT/record.log" 2>&1 & RPID=$!
}
record_end() {
  [ "${CMTIME_MEASURE:-}" = record ] || return 0
  kill -INT "$RPID"; wait "$RPID"
  echo "== profile of the half (perf record -a, N=$N): by process and library"
  perf report -i "$OUT/all.data" --stdio --sort comm,dso 2>/dev/null | grep -Ev '^#|^$' |
    head -n 25
  echo "== top symbols"
  perf report -i "$OUT/all.data" --stdio --sort comm,dso,sym 2>/dev/null | grep -Ev '^#|^$' |
    head -n 50
  rm -f "$OUT/all.data"
}
# route_window TRACE: CMTIME_MEASURE=route's count. The main thread (the trace's first
# pid) waits for each asynchronous step in a sched_yield loop: resolve addr's is its
# first run of them, resolve route's the second; the window is from the end of the
# first run to the end of the second, every thread's syscalls in it by name.
route_window() {
  awk '{ pid = $1; call = $3; sub(/\(.*/, "", call)
         resumed = call == "<..."; if (resumed) call = $4   # "<... NAME resumed>": counted once
         if (main == "") main = pid
         n++; P[n] = pid; C[n] = resumed ? "" : call
         if (pid == main) { y = call == "sched_yield"
           if (y && !in_run) runs++; if (!y && in_run) end[runs] = last; in_run = y
           if (y) last = n } }
    END { if (!end[2]) { print "route window: fewer than two sched_yield runs"; exit }
      for (i = end[1] + 1; i <= end[2]; i++) if (C[i] != "" && (C[i] != "sched_yield" || P[i] != main))
        k[(P[i] == main ? "main" : "other") " " C[i]]++
      for (x in k) printf "  %6d %s\n", k[x], x
      printf "route window: lines %d..%d of the trace\n", end[1] + 1, end[2] > "/dev/stderr" }' \
    "$1" 2>&1 | sort -k1,1nr | head -n 25
  # Resolve addr's calls come right before the first run: the main thread's last
  # syscalls before it (the bind step's uscmd exchanges, then any of the step's own).
  echo "main thread's last 16 syscalls before its first sched_yield:"
  awk '{ if (main == "") main = $1; if ($1 != main) next
         call = $3; sub(/\(.*/, "", call); if (call == "sched_yield") exit
         n++; T[n % 16] = $2 " " call }
    END { for (i = n - 15; i <= n; i++) if (i > 0) print "  " T[i % 16] }' "$1"
}
# syscall_callers TRACE: CMTIME_MEASURE=callers's count. Each traced call at its
# completion (a plain line, or its "<... NAME resumed>"; strace -k prints the stack
# there) is keyed by its name and second argument (futex's op, ioctl's request,
# openat's path with its numbers as N), the libc / libstdc++ frame nearest to the
# caller (in brackets: which lock; libc's symbols are only its exported ones, so
# name+offset) and the first 3 frames outside libc / libstdc++ / libgcc.
syscall_callers() {
  echo "  calls: $(grep -cE '^[0-9]+ +[a-z_0-9]+\(' "$1")"
  awk 'function flush() { if (op != "") k[op " | " frames]++; op = ""; frames = ""; nf = 0; last = "" }
    function arg(line,  o) { o = line; sub(/^[0-9]+ +[a-z_0-9]+\([^,]*, */, "", o); sub(/[,)].*/, "", o)
      sub(/_PRIVATE/, "", o); sub(/^FUTEX_/, "", o); gsub(/[0-9]+/, "N", o); return o }
    /^[0-9]+ +[a-z_0-9]+\(/ { flush(); name = $2; sub(/\(.*/, "", name); o = name " " arg($0)
      if ($0 ~ /<unfinished \.\.\.>/) { pending[$1] = o; next }
      op = o; next }
    /^[0-9]+ +<\.\.\. [a-z_0-9]+ resumed>/ { flush(); op = pending[$1]; next }
    /^ > / { if (op == "" || nf >= 3) next; f = $2
      if (f ~ /\/(libc|libstdc\+\+|libgcc_s|libibverbs|ld-linux[^\/]*)\.so/) {
        if (nf == 0) { last = f; sub(/.*\//, "", last); sub(/\(/, ":", last); sub(/\).*/, "", last) }
        next }
      if (nf == 0 && last != "") { frames = "[" last "] "; last = "" }
      lib = f; sub(/\(.*/, "", lib); sub(/.*\//, "", lib)
      sym = f; sub(/^[^(]*\(/, "", sym); sub(/\+0x[0-9a-f]+\).*/, "", sym); sub(/\).*/, "", sym)
      frames = frames (nf ? " < " : "") lib ":" sym; nf++; next }
    { flush() }
    END { flush(); for (x in k) printf "%7d %s\n", k[x], x }' "$1" | sort -k1,1nr | head -n 30 |
    c++filt | sed -E 's/\(([^()]|\([^()]*\))*\)//g'
}
# call_window TRACE FROM_LAST NAME: CMTIME_MEASURE=calls's count for one step. The main
# thread (the one with the most sched_yield calls: cmtime's waits) calls the step's
# function for every id between two of its sched_yield runs; each call sends one frame to
# uscmd (sendto; the drop-in's writes are eventfds) or one write to ucma. The connect and
# disconnect loops are the last two windows between runs (or from the start to the first
# run) with at least N sends, the last N of them (FROM_LAST 2 and 1; counted from the end:
# a step whose events all came during its calls has no wait, and with CMTIME_TRACE two
# waits with no traced call between them are one run). Printed: the sends, the loop's wall per call (first to last
# send), the mean time inside a send (strace -T), when another thread of the client first
# sent, and every traced syscall of the loop by thread (main / other) and name.
call_window() {
  awk -v from="$2" -v name="$3" -v ids="$N" '
    function secs(t,  a) { split(t, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
    NR == FNR { if ($3 ~ /^sched_yield\(/ && ++Y[$1] > most) { most = Y[$1]; main = $1 }; next }
    { pid = $1; call = $3; sub(/\(.*/, "", call)
      resumed = call == "<..."; if (resumed) call = $4
      n++; P[n] = pid; C[n] = call; R[n] = resumed; T[n] = secs($2)
      D[n] = 0; if (match($0, /<[0-9.]+>$/)) D[n] = substr($0, RSTART + 1, RLENGTH - 2)
      U[n] = $0 ~ /<unfinished \.\.\.>/
      if (pid == main && !resumed) { y = call == "sched_yield"
        if (y && !in_run) { runs++; start[runs] = n }
        if (!y && in_run) end[runs] = last; in_run = y; if (y) last = n } }
    END { # the calls that send: sendto to uscmd (the drop-in; its writes are eventfds)
      # where the main thread made N of them, else write (to ucma)
      for (i = 1; i <= n; i++) sendtos += P[i] == main && !R[i] && C[i] == "sendto"
      SEND = sendtos >= ids ? "^sendto$" : "^write$"
      # window 0: from the start to the first run (the resolve steps may end without a
      # wait when their events came during the calls)
      end[0] = 0
      for (w = 0; w < runs; w++) { c = 0
          for (i = end[w] + 1; i < start[w + 1]; i++) c += P[i] == main && !R[i] && C[i] ~ SEND
          if (c >= ids) win[++wins] = w }
      if (wins < from) { printf "%s: %d loops of at least %d sends; %s per window between %d runs:",
          name, wins, ids, SEND, runs
        for (w = 0; w < runs; w++) { c = 0
          for (i = end[w] + 1; i < start[w + 1]; i++) c += P[i] == main && !R[i] && C[i] ~ SEND
          if (c) printf " %d:%d", w, c }
        print ""; exit }
      from = win[wins - from + 1]
      sends = 0
      for (i = end[from] + 1; i < start[from + 1]; i++)
        if (P[i] == main && !R[i] && C[i] ~ SEND) S[++sends] = i
      if (sends < 2) { printf "%s: %d sends in the loop\n", name, sends; exit }
      # More than one per id: rdma_create_qp on the kernel CM writes to ucma too (the create qp
      # step, in the same window): the loop is the last ids.
      base = sends > ids ? sends - ids : 0; sends -= base
      if (sends < 2) { printf "%s: %d sends in the loop\n", name, sends; exit }
      first = S[base + 1]; lastsend = S[base + sends]; inside = 0
      for (i = first; i <= lastsend; i++) if (!R[i]) k[(P[i] == main ? "main " : "other ") C[i]]++
      for (i = first; i < start[from + 1]; i++)   # a send resumed after the last one began
        if (P[i] == main && !U[i] && C[i] ~ SEND) inside += D[i]
      for (i = first + 1; i <= lastsend && !other; i++)
        if (P[i] != main && !R[i] && C[i] ~ /^(sendto|write)$/) other = i
      printf "%s: %d sends, loop %.1f ms, %.1f us per call, %.1f us inside each send; ", name,
        sends, (T[lastsend] - T[first]) * 1000, (T[lastsend] - T[first]) * 1e6 / (sends - 1),
        inside * 1e6 / sends
      if (other) { c = 0; for (i = first; i < other; i++)
          c += P[i] == main && !R[i] && C[i] ~ SEND
        printf "another thread first sent %.1f ms after the first call, during call %d\n",
          (T[other] - T[first]) * 1000, c }
      else printf "no other thread sent during the loop\n"
      fflush()
      for (x in k) printf "  %7.2f per call  %s\n", k[x] / sends, x | "sort -rn | head -n 20"
      close("sort -rn | head -n 20") }' "$1" "$1"
}
# perf_to_trace DATA: CMTIME_MEASURE=callsperf's perf.data as call_window reads a trace
# ("TID 0:0:SECONDS NAME("): one line per syscall entry, in time order.
perf_to_trace() {
  perf script -i "$1" -F tid,time,event 2>/dev/null |
    awk '{ t = $2; sub(/:$/, "", t); e = $3; sub(/^syscalls:sys_enter_/, "", e); sub(/:$/, "", e)
           print $1, "0:0:" t, e "()" }'
}
show_measure() {
  local f
  if [ -e "$OUT/client.perfdata" ]; then
    perf_to_trace "$OUT/client.perfdata" > "$OUT/client.measure"; rm -f "$OUT/client.perfdata"; fi
  for f in "$OUT"/*.measure; do [ -e "$f" ] || continue
    echo "== $(basename "$f" .measure) (${CMTIME_MEASURE}, N=$N)"
    if [ "$CMTIME_MEASURE" = route ]; then route_window "$f"
    elif [ "$CMTIME_MEASURE" = calls ] || [ "$CMTIME_MEASURE" = callsperf ]; then call_window "$f" 2 connect; call_window "$f" 1 disconnect
    elif [ "$CMTIME_MEASURE" = callers ]; then syscall_callers "$f"
    elif [ "$CMTIME_MEASURE" = trace ]; then   # what a call opens, and the calls that fail
      local call='^[0-9]+ +(openat|ioctl)\(([^,]*), ("[^"]*"|[A-Z_0-9]*|0x[0-9a-f]*)'
      sed -nE "s/$call.* = (-?[0-9]+ ?[A-Z]*).*/\\1 \\3 \\4/p" "$f" |
        sed -E 's/= ?[0-9]+$//; s/ [0-9]+$//' | sort | uniq -c | sort -rn | head -n 25
    else grep -Ev '^ *$|^#' "$f" | head -n 25; fi
    rm -f "$f"; done
}

# route_floor: CMTIME_ROUTE_FLOOR's three rounds of the resolve-route floor, N ids each
route_floor() {
  [ "${CMTIME_ROUTE_FLOOR:-0}" = 1 ] || return 0
  echo "== route floor (VM load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$USCM_VM_BIN/tests/vm/bench/route_floor" --n "$N" --rounds 3 || fail route-floor "route_floor failed"
}

# run_pair NAME READY PORT SERVER... ::: CLIENT...: a cmtime server, then the client
# (which prints the step table); the server (Debian's cmtime serves until killed) is
# stopped once the client is done. READY: kernel (a listener in `rdma resource`) or
# uscm ("listening on" from the drop-in under USCM_DEBUG=1). Logs: $OUT/NAME-*.log.
# The separator is ":::", not "--": `uscm exec ... -- cmtime` has its own "--" (once
# split there, the server was `uscm exec --device rxe0` with no program, and the
# wait for its "listening on" ran out its bound).
# Every step is bounded ($T s, the server's stop 10 s): a hung half ends with a line
# saying which step, and the other half still runs.
run_pair() {
  local name=$1 ready=$2 port=$3; shift 3
  local -a server=() client=()
  while [ $# -gt 0 ] && [ "$1" != ::: ]; do server+=("$1"); shift; done
  [ $# -gt 0 ] || { echo "$name: run_pair without ':::'"; return 1; }
  shift; client=("$@")
  "${server[@]}" > "$OUT/$name-server.log" 2>&1 & local spid=$!
  if [ "$ready" = kernel ]; then kernel_listening "$port"; else
    wait_for "$OUT/$name-server.log" 'listening on' "$spid"; fi ||
    { echo "$name: the server did not listen"; sed "s/^/  $name-server| /" "$OUT/$name-server.log"
      stop_pid "$spid"; return 1; }
  local t0=$EPOCHREALTIME
  timeout -k 10 $T "${client[@]}" > "$OUT/$name-client.log" 2>&1; local rc=$?
  echo "$name: client exit $rc after $(echo "$EPOCHREALTIME - $t0" | bc) s$([ "$rc" = 124 ] &&
    echo " (killed at the ${T} s bound)")"
  stop_tree "$spid"
  sed "s/^/  $name| /" "$OUT/$name-client.log"
  [ "$rc" = 0 ]
}

# totals NAME: "step<TAB>total" per line of the client's table ("create id : 12.3 ...")
totals() {
  awk -F: 'NF >= 2 && $2 ~ /^ *[0-9.]+/ { sub(/ +$/, "", $1); split($2, v, " "); print $1 "\t" v[1] }' \
    "$OUT/$1-client.log"
}

lsmod | grep -qw ib_cm && fail bench-uscm "ib_cm is loaded: the drop-in half needs the port's CM class"
i=0
for BIN in ${CMTIME_BINS:-$USCM_VM_BIN}; do
  route_floor
  i=$((i + 1)); USCM=$BIN/tools/uscm
  PAIRS=(${CMTIME_PAIR:-one}); PAIR=${PAIRS[i - 1]:-${PAIRS[-1]}}
  echo "drop-in run $i: $BIN; load: $(cat /proc/loadavg); hogs: ${CMTIME_HOG:-0}; pair: $PAIR"
  CAPTURE=(); [ "${CMTIME_CAPTURE:-0}" = 1 ] && CAPTURE=(--capture "$OUT/wire$i.pcap")
  CDEV=rxe0 CB=$A UPID= UPID1= NOUSCMD=()
  if [ "$PAIR" = direct ]; then CDEV=rxe1 CB=$B NOUSCMD=(--no-uscmd); else
    $(measure uscmd) "$BIN/tools/uscmd" --ca rxe0 --port 1 "${CAPTURE[@]}" > $OUT/uscmd.log 2>&1 & UPID=$!
    wait_for $OUT/uscmd.log '^uscmd: rxe0 port 1' || fail bench-uscm "uscmd did not start"
  fi
  if [ "$PAIR" = two ]; then
    CDEV=rxe1 CB=$B
    $(measure uscmd-b) "$BIN/tools/uscmd" --ca rxe1 --port 1 > $OUT/uscmd-b.log 2>&1 & UPID1=$!
    wait_for $OUT/uscmd-b.log '^uscmd: rxe1 port 1' || fail bench-uscm "rxe1's uscmd did not start"
  fi
  record_start; hog_start
  run_pair uscm$i uscm 7472 env USCM_DEBUG=1 "$USCM" exec "${NOUSCMD[@]}" --device rxe0 -- \
      $(measure server) cmtime -b $A -p 7472 -c "$N" ::: \
    env USCM_CM_COUNTERS=1 "$USCM" exec "${NOUSCMD[@]}" --device $CDEV -- $(measure client) cmtime -s $A -b $CB -p 7472 -c "$N" &&
    pass bench-uscm$i || fail bench-uscm$i "see above"
  hog_end; record_end
  if [ -n "$UPID" ]; then stop_tree "$UPID"; sed 's/^/  uscmd| /' $OUT/uscmd.log; fi
  if [ -n "$UPID1" ]; then stop_tree "$UPID1"; sed 's/^/  uscmd-b| /' $OUT/uscmd-b.log; fi
  show_measure
  show_capture "$OUT/wire$i.pcap"
done
[ "${CMTIME_KERNEL:-1}" -gt 0 ] || { route_floor; group_end; }
# (--device rxe0: `uscm exec` starts no uscmd for rxe1; with ours gone ib_cm may take rxe0's CM class)
modprobe -a rdma_ucm rdma_cm ib_cm || fail bench-kernel "modprobe rdma_ucm rdma_cm ib_cm failed"
for ((k = 1; k <= ${CMTIME_KERNEL:-1}; k++)); do
  route_floor
  port=$((7470 - k + 1))
  record_start; hog_start
  run_pair kernel$k kernel $port $(measure server) cmtime -b $A -p $port -c "$N" ::: \
    $(measure client) cmtime -s $A -b $B -p $port -c "$N" && pass bench-kernel$k ||
    fail bench-kernel$k "see above"
  hog_end; record_end; show_measure
done
route_floor
echo "cmtime -c $N, step totals (ms): kernel CM | uscm drop-in | kernel / uscm (the last runs)"
awk -F'\t' 'NR == FNR { k[$1] = $2; order[++n] = $1; next } { u[$1] = $2 }
  END { for (i = 1; i <= n; i++) { s = order[i]
          printf "%-14s %10s %10s %8.1fx\n", s, k[s], u[s], (u[s] > 0 ? k[s] / u[s] : 0) } }' \
  <(totals kernel$((k - 1))) <(totals uscm$i)
group_end
