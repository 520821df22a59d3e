#!/usr/bin/env bash
# Runs the uscm binary the way a user does and checks output and exit codes.
set -uo pipefail
U="${TEST_SRCDIR:-$PWD}/${TEST_WORKSPACE:-__main__}/tools/uscm"
[[ -x "$U" ]] || U="$(dirname "$0")/uscm"
T="${TEST_TMPDIR:-$(mktemp -d)}"
cd "$T"
fails=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name=$1 want=$2 pat=$3; shift 4
  "$@" >out.txt 2>err.txt; local rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL $name: exit $rc, wanted $want"; cat out.txt err.txt | head -20; fails=$((fails + 1)); return
  fi
  if [[ -n "$pat" ]] && ! grep -qE -- "$pat" out.txt err.txt; then
    echo "FAIL $name: output lacks /$pat/"; cat out.txt err.txt | head -20; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}

# Usage and help.
check no-args 2 "Usage: uscm <command>" -- "$U"
check top-help 0 "Commands:" -- "$U" --help
check unknown-command 2 "unknown command 'frobnicate'" -- "$U" frobnicate
for c in demo ping saquery sim dump; do
  check "$c-help" 0 "Usage: uscm $c" -- "$U" "$c" --help
  check "$c-bad-option" 2 "unknown option '--bogus'" -- "$U" "$c" --bogus
done
check bad-fabric 2 "accepted forms: sim, ibsim, umad:<ca>:<port>, ud:<device>:<port>, router:<socket>" -- "$U" demo --fabric=nope
check bad-fabric-router 2 "the router's socket path is empty" -- "$U" ping --fabric=router:
check router-not-running 1 "router:/nonexistent/uscmd.sock: .*is uscmd running\\? start it with: uscmd --socket /nonexistent/uscmd.sock" -- "$U" saquery --fabric=router:/nonexistent/uscmd.sock
check bad-fabric-port 2 "port 'x' is not a number" -- "$U" ping --fabric=umad:mlx5_0:x
if [[ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]]; then
  check umad-no-device 1 "no InfiniBand device found; try --fabric=sim|no InfiniBand device found.*try --fabric=sim" -- "$U" ping --fabric=umad:mlx5_0:1 --role=client --dlid=3
  check ud-no-device 1 "try --fabric=sim" -- "$U" saquery --fabric=ud:mlx5_0:1
  check ping-server-no-device 1 "uscm ping: no InfiniBand device found \(/sys/class/infiniband is empty\); try --fabric=sim" -- "$U" ping --fabric=umad:mlx5_0:1 --role=server
  check ping-client-no-device 1 "uscm ping: no InfiniBand device found" -- "$U" ping --fabric=ud:mlx5_0:1 --role=client --dlid=3
  check dump-live-no-device 1 "uscm dump: no InfiniBand device found.*try --fabric=sim" -- "$U" dump --live --fabric=umad:mlx5_0:1 --count=1
  check saquery-umad-no-device 1 "uscm saquery: no InfiniBand device found" -- "$U" saquery MCMR --fabric=umad:mlx5_0:1
fi
check ping-no-role 2 "a device fabric needs --role=server or --role=client" -- "$U" ping --fabric=umad:mlx5_0:1
check ping-client-no-peer 2 "the client needs the server's --dlid=LID or --dgid=GID" -- "$U" ping --fabric=umad:mlx5_0:1 --role=client
check ping-ibsim-role 2 "--role is for device fabrics; ibsim runs both" -- "$U" ping --fabric=ibsim --role=server
check dump-live-sim 2 "--live needs a device fabric" -- "$U" dump --live --fabric=sim
check dump-live-file 2 "--live takes no FILE" -- "$U" dump --live --fabric=umad:mlx5_0:1 x.pcap
check saquery-topology-device 2 "--topology is for --fabric=sim" -- "$U" saquery --fabric=umad:mlx5_0:1 --topology=x.net
check bad-int 2 "is not an integer" -- "$U" ping --connections=ten
check range 2 "out of range" -- "$U" ping --connections=0
check long-pd 2 "a REQ carries at most 92" -- "$U" ping --private-data="$(printf 'x%.0s' {1..93})"

# demo: the timeline and the capture.
check demo 0 "Capture: d.pcap" -- "$U" demo --capture d.pcap
for line in "host1 -> switch1\(SA\) SA PathRecord Get " "host1 -> host2 +CM REQ" "host2 -> host1 +CM REP" \
    "CM RTU" "CM REJ" "Reason=0x001c" "MCMemberRecord Set" "MCMemberRecord Delete" "CM DREQ" \
    "CM DREP" "ECE vendor 0x0015b3 options 0x1" "private data \"busy, try later\"" "TIMEWAIT_EXIT"; do
  grep -qE -- "$line" out.txt || { echo "FAIL demo timeline lacks /$line/"; fails=$((fails + 1)); }
done
check dump 0 "17 packets, 0 not decodable" -- "$U" dump d.pcap
grep -q "CM REQ Send" out.txt || { echo "FAIL dump lacks the REQ"; fails=$((fails + 1)); }
check dump-verbose 0 "REQ.LocalCommID" -- "$U" dump --verbose d.pcap
check dump-missing 1 "cannot read nonexistent.pcap" -- "$U" dump nonexistent.pcap
check dump-no-file 2 "expected one capture FILE" -- "$U" dump
check demo-role-no-peer 2 "--role=client needs the server's --peer-lid" -- "$U" demo --fabric=umad:mlx5_0:1 --role=client
check demo-role-sim 2 "--role needs a device fabric" -- "$U" demo --role=server
check demo-ibsim-dump 2 "--dump is for --fabric=sim" -- "$U" demo --fabric=ibsim --dump
check demo-device 2 "demo needs two hosts and an SA" -- "$U" demo --fabric=umad:mlx5_0:1
if [[ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]]; then
  check demo-role-no-device 1 "uscm demo: no InfiniBand device found" -- "$U" demo --fabric=umad:mlx5_0:1 --role=server --capture=
fi

# sim: CSV columns, determinism, sweep.
check sim 0 "wrote run1/connections.csv" -- "$U" sim --out run1 --connections 50 --loss 0,0.05 --no-plots
head -1 run1/summary.csv | grep -q "^loss,connections,established,rejected,failed,setup_min_us,setup_p50_us,setup_p99_us,setup_max_us" ||
  { echo "FAIL summary.csv columns"; fails=$((fails + 1)); }
head -1 run1/connections.csv | grep -q "^loss,connection,client,server,outcome,setup_us,retransmissions$" ||
  { echo "FAIL connections.csv columns"; fails=$((fails + 1)); }
[[ $(grep -c '^0.05,' run1/connections.csv) -eq 50 ]] || { echo "FAIL 50 rows for loss 0.05"; fails=$((fails + 1)); }
check sim-again 0 "" -- "$U" sim --out run2 --connections 50 --loss 0,0.05 --no-plots
cmp -s run1/connections.csv run2/connections.csv || { echo "FAIL same seed, different CSV"; fails=$((fails + 1)); }
check sim-seed 0 "" -- "$U" sim --out run3 --connections 50 --loss 0,0.05 --no-plots --seed 2
cmp -s run1/connections.csv run3/connections.csv && { echo "FAIL seed 2 gave seed 1's CSV"; fails=$((fails + 1)); }
check sim-bad-loss 2 "not a probability" -- "$U" sim --loss 0,1.5

# ping and saquery on the simulated fabric.
check ping 0 "setup time \(us, virtual\): min [0-9.]+  p50 [0-9.]+  p99 [0-9.]+  max" -- "$U" ping -c 20 --ece
grep -q "20 established, 0 failed" out.txt || { echo "FAIL ping count"; fails=$((fails + 1)); }
check ping-reject 0 "20 rejected as asked" -- "$U" ping -c 20 --reject
check saquery 0 "PathRecord dump:" -- "$U" saquery PR --slid=2 --dlid=3
grep -q "slid....................2" out.txt || { echo "FAIL saquery slid"; fails=$((fails + 1)); }
check saquery-mcmr 0 "MGID....................ff12:a01b" -- "$U" saquery MCMR --join=1
check saquery-bad 2 "expected PR or MCMR" -- "$U" saquery XYZ

echo "$fails failed"
[[ $fails -eq 0 ]]
