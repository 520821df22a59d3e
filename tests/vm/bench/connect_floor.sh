#!/usr/bin/env bash
# tests/vm/bench/connect_floor.sh [N]: the floor under cmtime's connect step in the VM
# (docs/API.md "cmtime"): what any CM, kernel or user space, must do per connection
# with no CM at all (tests/vm/bench/connect_floor.cc: the 6 QP modifies and the 3 CM
# MADs through umad), against Debian's cmtime on the kernel CM, in ONE VM boot:
#   floor, kernel cmtime, floor, kernel cmtime   (N connections each, default 1000)
# A bench, not a test and not in the CI lane. Run from the repository:
#   bazel build //tests/vm/bench:connect_floor && tests/vm/bench/connect_floor.sh [N]
# (USCM_VM_BIN as for tests/vm/run.sh). The host's load is printed before and after.
# FLOOR_SMP=1 boots one vCPU instead of two (under TCG both share one host thread; with
# two, the guest's busy ticks may count a turn-taking pair twice).
# Around each kernel cmtime client: the VM's busy CPU (/proc/stat, all CPUs) against the
# client's wall time (cmtime's client spins in sched_yield while it waits, so busy close
# to wall does not mean the CM's work filled it; the floor's figures are the ones to use).
. "$(dirname "$0")/../lib.sh"
if ! in_vm; then
  # resolved now: a build with another config (--config=asan) moves the bazel-bin link
  USCM_VM_BIN=$(readlink -f "$USCM_VM_BIN")
  echo "host load before: $(uptime)"
  "$VM_DIR/boot.sh" --timeout 1500 --smp "${FLOOR_SMP:-2}" --env "USCM_VM_BIN=$USCM_VM_BIN" \
    --env "USCM_VM_GROUP_LOG=/tmp/group-log" --env "FLOOR_N=${1:-1000}" \
    -- "bash $(readlink -f "$0")"
  rc=$?
  echo "host load after: $(uptime)"
  exit $rc
fi

N=${FLOOR_N:-1000}
T=400
A=192.168.77.1 B=192.168.77.2
OUT=/tmp
FLOOR=$USCM_VM_BIN/tests/vm/bench/connect_floor

# vm_busy_ms: the VM's busy CPU so far (/proc/stat's first line, not idle or iowait)
vm_busy_ms() {
  awk -v hz="$(getconf CLK_TCK)" \
    '/^cpu / { print int(($2 + $3 + $4 + $7 + $8 + $9) * 1000 / hz); exit }' /proc/stat
}

# cm_counters: the kernel ib_cm's MAD counters of both ports, summed (cumulative): a
# retry storm shows as tx retries and more REQs / MRAs than connections.
cm_counters() {
  local d
  for d in /sys/class/infiniband/rxe[01]/ports/1 /sys/class/infiniband_cm/rxe[01]/1; do
    [ -d "$d/cm_tx_msgs" ] || continue
    grep -H . "$d"/cm_tx_msgs/{req,rep,rtu,mra,dreq} "$d"/cm_tx_retries/{req,rep,dreq} 2>/dev/null
  done | awk -F: '{ n = split($1, p, "/"); k = p[n - 1] "/" p[n]; s[k] += $2 }
    END { for (k in s) printf "%s=%d ", k, s[k]; print "" }'
}

# floor I: the bench program (server rxe0, client rxe1)
floor() {
  echo "== floor $1 (VM load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$FLOOR" --n "$N" && pass floor$1 || fail floor$1 "connect_floor failed"
}

# kernel_cmtime I: Debian's cmtime on the kernel CM, server on rxe0, client bound to
# rxe1 (as tests/vm/bench/cmtime.sh's kernel half); prints the client's step table.
kernel_cmtime() {
  local port=$((7470 + $1))
  echo "== kernel cmtime $1 (VM load $(cut -d' ' -f1-3 /proc/loadavg))"
  cmtime -b $A -p $port -c "$N" > $OUT/server$1.log 2>&1 & local spid=$!
  kernel_listening $port || { fail kernel$1 "no listener"; stop_pid $spid; return; }
  local b0 w0=$EPOCHREALTIME; b0=$(vm_busy_ms)
  timeout -k 10 $T cmtime -s $A -b $B -p $port -c "$N" > $OUT/client$1.log 2>&1 &&
    pass kernel$1 || fail kernel$1 "client exit $? (log below)"
  echo "kernel cmtime $1 client run: wall $(echo "($EPOCHREALTIME - $w0) * 1000 / 1" | bc) ms," \
    "VM busy $(( $(vm_busy_ms) - b0 )) ms (all CPUs)"
  stop_pid $spid
  echo "kernel ib_cm counters after run $1 (both ports, since modprobe): $(cm_counters)"
  sed 's/^/  | /' $OUT/client$1.log
}

floor 1
modprobe -a rdma_ucm rdma_cm ib_cm || fail modprobe "rdma_ucm rdma_cm ib_cm"
kernel_cmtime 1
floor 2
kernel_cmtime 2
group_end
