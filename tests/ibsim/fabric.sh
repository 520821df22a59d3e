#!/usr/bin/env bash
# Manual counterpart of IbsimFabric (tests/ibsim/ibsim_fabric.h): a private
# ibsim + OpenSM subnet for running uscm programs by hand.
#
#   eval "$(tests/ibsim/fabric.sh up [NETFILE [SM_NODE]])"   # starts, waits for ACTIVE
#   ibsim_run hostA bazel-bin/tests/ibsim/umad_client sa-cpi  # run on a node
#   tests/ibsim/fabric.sh down "$IBSIM_DIR"                   # stops, removes the dir
#
# `up` prints shell assignments (IBSIM_DIR, IBSIM_SOCKNAME, ...) and defines
# ibsim_run NODE CMD...: CMD under LD_PRELOAD=libumad2sim.so with SIM_HOST=NODE,
# run in $IBSIM_DIR (umad2sim writes its fake sysfs into the current directory).
# Defaults: tests/topologies/ibsim-2hosts.net, OpenSM on node "sm".
set -euo pipefail
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so

up() {
  local net=${1:-$(dirname "$0")/../topologies/ibsim-2hosts.net} sm=${2:-sm}
  net=$(readlink -f "$net")
  for f in /usr/bin/ibsim /usr/sbin/opensm /usr/sbin/ibstat "$UMAD2SIM" "$net"; do
    [[ -r $f ]] || { echo "fabric.sh: $f missing (tools/setup.sh installs ibsim-utils, libumad2sim0, opensm, infiniband-diags)" >&2; exit 1; }
  done
  local dir sock
  dir=$(mktemp -d /tmp/ibsim-XXXXXX)
  sock="uscm-sh-$$-${dir##*-}"
  # setsid: own process groups, so `down` can end them and nothing else.
  IBSIM_SOCKNAME=$sock setsid ibsim -s -n ${IBSIM_VERBOSE:+-v -v} "$net" >"$dir/ibsim.out" 2>&1 </dev/null &
  echo $! >"$dir/ibsim.pid"
  for _ in $(seq 50); do grep -q "simulator ready" "$dir/ibsim.out" && break; sleep 0.1; done
  # exec: $! is OpenSM itself, and no shell keeps the caller's stdout open.
  (cd "$dir" && exec env IBSIM_SOCKNAME="$sock" SIM_HOST="$sm" OSM_TMP_DIR="$dir" \
     OSM_CACHE_DIR="$dir" LD_PRELOAD="$UMAD2SIM" setsid opensm -f "$dir/opensm.log") \
    >"$dir/opensm.out" 2>&1 </dev/null &
  echo $! >"$dir/opensm.pid"
  # OpenSM flushes its log lazily: poll the port state instead (each ibstat
  # is a new umad2sim client, which snapshots the port when it starts).
  local node ok
  for node in $(awk '/^(Hca|Ca)/ {gsub(/"/, "", $3); print $3}' "$net"); do
    ok=0
    for _ in $(seq 200); do
      if (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=$node LD_PRELOAD=$UMAD2SIM \
            ibstat 2>/dev/null | grep -q "State: Active"); then ok=1; break; fi
      sleep 0.1
    done
    ((ok)) || { echo "fabric.sh: $node not ACTIVE after 20 s; see $dir" >&2; down "$dir"; exit 1; }
  done
  cat <<EOS
export IBSIM_DIR=$dir IBSIM_SOCKNAME=$sock
ibsim_run() { local n=\$1; shift; (cd "$dir" && SIM_HOST=\$n LD_PRELOAD=$UMAD2SIM ASAN_OPTIONS=\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}verify_asan_link_order=0 "\$@"); }
EOS
}

down() {
  local dir=${1:?usage: fabric.sh down DIR}
  local f pid
  for f in opensm ibsim; do
    [[ -f $dir/$f.pid ]] || continue
    pid=$(cat "$dir/$f.pid")
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  [[ $dir == /tmp/ibsim-* ]] && rm -rf "$dir"
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) shift; down "$@" ;;
  *) echo "usage: $0 up [NETFILE [SM_NODE]] | down DIR" >&2; exit 2 ;;
esac
