#!/usr/bin/env bash
# Debian's unmodified cmtime on uscm's drop-in librdmacm.so.1 (issue 13), against the
# kernel CM, both ways. cmtime brings its own QPs (ibv_create_qp on id->verbs, moved
# with rdma_init_qp_attr + ibv_modify_qp, then rdma_establish on the active side) and
# keeps all its ids in flight at once: every step (create id, resolve addr / route,
# create qp, connect, disconnect, destroy) runs for all N ids before the next one.
# Two linked VMs: a runs the kernel CM, b has none and runs cmtime through `uscm exec`
# (uscmd started on demand).
#   1. b: drop-in `cmtime -s a -c N`  ->  a: kernel `cmtime -b a`
#   2. a: kernel  `cmtime -s b -c N`  ->  b: drop-in `cmtime -b b`
# cmtime's server serves until killed: the client's exit status and its step table
# (every step's line) are the checks. Speed is not checked here (tests/vm/bench/cmtime.sh).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 600

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
T=240   # seconds for any one step (loaded 2-core host, TCG)
N=${USCM_CMTIME_N:-1000}
USCM=$USCM_VM_BIN/tools/uscm

# check_table NAME LOG: the client's run ended with cmtime's per-step table
check_table() {
  local step missing=""
  for step in 'create id' 'resolve addr' 'resolve route' 'create qp' 'connect' 'disconnect' 'destroy'; do
    grep -q "^$step" "$2" || missing+=" [$step]"
  done
  if [ -z "$missing" ]; then pass "$1"; sed 's/^/  = /' "$2" | tail -n 12; else
    sed 's/^/  | /' "$2" | tail -n 30; fail "$1" "no line for$missing"; fi
}
# client NAME LOG CMD...: PASS when the cmtime client exits 0
client() {
  local name=$1 log=$2; shift 2
  timeout $T "$@" > "$log" 2>&1; local rc=$?
  if [ "$rc" = 0 ]; then pass "$name"; else
    sed 's/^/  | /' "$log" | tail -n 30; fail "$name" "exit $rc"; fi
}

if [ "$USCM_VM_ROLE" = a ]; then
  cmtime -b "$IP" -p 7480 -c "$N" > /tmp/cmtime-s.log 2>&1 & pid=$!
  kernel_listening 7480 && sync.sh signal kernel-server-ready
  sync.sh wait dropin-client-done $T
  kill "$pid"; wait "$pid" 2>/dev/null
  sync.sh wait dropin-server-ready $T
  client kernel-cmtime-to-dropin /tmp/cmtime-c.log cmtime -s "$PEER" -b "$IP" -p 7481 -c "$N"
  check_table kernel-cmtime-table /tmp/cmtime-c.log
  sync.sh signal kernel-client-done
  echo "$FAILED" | sync.sh put a-failed
else
  check no-kernel-cm-b bash -c '! lsmod | grep -Ewq "^(ib_cm|rdma_cm|rdma_ucm)"'
  sync.sh wait kernel-server-ready $T
  client dropin-cmtime-to-kernel /tmp/cmtime-c.log \
    "$USCM" exec -- cmtime -s "$PEER" -b "$IP" -p 7480 -c "$N"
  check_table dropin-cmtime-table /tmp/cmtime-c.log
  sync.sh signal dropin-client-done
  USCM_DEBUG=1 "$USCM" exec -- cmtime -b "$IP" -p 7481 -c "$N" > /tmp/cmtime-s.log 2>&1 & pid=$!
  wait_for /tmp/cmtime-s.log 'listening on' && sync.sh signal dropin-server-ready
  sync.sh wait kernel-client-done $T
  kill "$pid"; wait "$pid" 2>/dev/null
  check_output dropin-server-through-uscmd 'clients [0-9]+ accepted|rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
fi
group_end
