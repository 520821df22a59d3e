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
check ping-window-sim 2 "--window is for device fabrics and ibsim" -- "$U" ping --window=4
check ping-window-range 2 "window" -- "$U" ping --fabric=ibsim --window=0
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
check sim-bad-duplicate 2 "--duplicate: '2' is not a probability" -- "$U" sim --duplicate 0,2
check sim-bad-latency 2 "--latency-us: 'x' is not a delay" -- "$U" sim --latency-us 1,x
check sim-bad-hosts 2 "--hosts: '1' is not an integer in \[2, 100000\]" -- "$U" sim --hosts 2,1
check sim-bad-progress 2 "--progress=sometimes: expected always, auto or never" -- "$U" sim --progress=sometimes
check sim-too-many-runs 2 "the sweep has 20000 runs" -- "$U" sim --loss "$(seq -s, 0 0.0001 0.0099)" --duplicate "$(seq -s, 0 0.001 0.199)"

# sim sweeps: the cross product of every list, a column per swept parameter.
sweep=(sim --connections 10 --loss 0,0.05 --duplicate 0,0.1 --latency-us 0.5,20 --jitter-us 0,3 --hosts 2,3 --no-plots)
check sim-sweep 0 "loss 0.05, duplicate 0.1, latency_us 20, jitter_us 3, hosts 3" -- "$U" "${sweep[@]}" --out sw1
head -1 sw1/connections.csv | grep -qx "loss,duplicate,latency_us,jitter_us,hosts,connection,client,server,outcome,setup_us,retransmissions" ||
  { echo "FAIL sweep connections.csv columns: $(head -1 sw1/connections.csv)"; fails=$((fails + 1)); }
head -1 sw1/summary.csv | grep -q "^loss,duplicate,latency_us,jitter_us,hosts,connections,established," ||
  { echo "FAIL sweep summary.csv columns: $(head -1 sw1/summary.csv)"; fails=$((fails + 1)); }
[[ $(($(wc -l < sw1/summary.csv) - 1)) -eq 32 ]] || { echo "FAIL sweep: $(($(wc -l < sw1/summary.csv) - 1)) summary rows, wanted 32 (2^5 runs)"; fails=$((fails + 1)); }
[[ $(($(wc -l < sw1/connections.csv) - 1)) -eq 320 ]] || { echo "FAIL sweep: $(($(wc -l < sw1/connections.csv) - 1)) connection rows, wanted 320"; fails=$((fails + 1)); }
# Every point of the product once (loss varies fastest), 10 connections each.
want_points=$(for h in 2 3; do for l in 0.5 20; do for j in 0 3; do for d in 0 0.1; do for p in 0 0.05; do
  echo "$p,$d,$l,$j,$h"; done; done; done; done; done)
[[ "$(tail -n +2 sw1/summary.csv | cut -d, -f1-5)" == "$want_points" ]] || { echo "FAIL sweep points/order in summary.csv"; fails=$((fails + 1)); }
[[ "$(tail -n +2 sw1/connections.csv | cut -d, -f1-5 | uniq -c | awk '$1 != 10' | wc -l)" -eq 0 ]] ||
  { echo "FAIL sweep: a run without 10 connection rows"; fails=$((fails + 1)); }
[[ -f sw1/topology-h3.net ]] || { echo "FAIL sweep: no generated topology-h3.net"; fails=$((fails + 1)); }
# The parameters take effect: 20 us latency is slower than 0.5 us (p50 setup, loss 0).
p50_fast=$(awk -F, '$1=="0" && $2=="0" && $3=="0.5" && $4=="0" && $5=="2" {print $12}' sw1/summary.csv)
p50_slow=$(awk -F, '$1=="0" && $2=="0" && $3=="20" && $4=="0" && $5=="2" {print $12}' sw1/summary.csv)
awk -v a="$p50_fast" -v b="$p50_slow" 'BEGIN { exit !(a > 0 && b > a) }' ||
  { echo "FAIL sweep: p50 at 20 us latency ($p50_slow) not above 0.5 us ($p50_fast)"; fails=$((fails + 1)); }
check sim-sweep-again 0 "" -- "$U" "${sweep[@]}" --out sw2
cmp -s sw1/connections.csv sw2/connections.csv && cmp -s sw1/summary.csv sw2/summary.csv ||
  { echo "FAIL sweep: same seed, different CSV"; fails=$((fails + 1)); }
# Topology sweep: a list of net files (the generated ones), a topology column.
check sim-topology-sweep 0 "topology sw1/topology-h3.net" -- "$U" sim --connections 5 --loss 0 --hosts 3 --topology sw1/topology-h3.net,run1/topology.net --no-plots --out sw3
head -1 sw3/summary.csv | grep -q "^loss,topology,connections," || { echo "FAIL topology column: $(head -1 sw3/summary.csv)"; fails=$((fails + 1)); }
[[ "$(tail -n +2 sw3/summary.csv | cut -d, -f1-2)" == $'0,sw1/topology-h3.net\n0,run1/topology.net' ]] ||
  { echo "FAIL topology sweep rows"; fails=$((fails + 1)); }

# sim plots: gnuplot (tools/setup.sh installs it) draws two PNGs.
if ! command -v gnuplot >/dev/null; then
  echo "FAIL sim-plots: gnuplot is not installed; run tools/setup.sh (apt-get install gnuplot-nox)"; fails=$((fails + 1))
else
  check sim-plots 0 "wrote pl/setup_cdf.png and pl/retransmissions.png" -- "$U" sim --out pl --connections 20 --loss 0,0.05 --latency-us 0.5,5
  for png in pl/setup_cdf.png pl/retransmissions.png; do
    if [[ ! -s $png ]]; then
      echo "FAIL sim-plots: no $png"; fails=$((fails + 1)); continue
    fi
    [[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
      { echo "FAIL sim-plots: $png lacks the PNG signature"; fails=$((fails + 1)); }
    # Width and height from the IHDR chunk (big-endian at bytes 16..23).
    read -r w h < <(od -An -tu1 -j16 -N8 "$png" | awk '{ print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8 }')
    [[ "$w" -eq 900 && "$h" -eq 600 ]] || { echo "FAIL sim-plots: $png is ${w}x${h}, wanted 900x600"; fails=$((fails + 1)); }
    if command -v file >/dev/null; then
      file "$png" | grep -q "PNG image data, 900 x 600" || { echo "FAIL sim-plots: file(1) says $(file "$png")"; fails=$((fails + 1)); }
    fi
  done
  # One curve per run, titled by the swept parameters.
  [[ $(grep -o "title 'loss [0-9.]*, latency_us [0-9.]*'" pl/plots.gp | wc -l) -eq 8 ]] ||
    { echo "FAIL sim-plots: plots.gp lacks 4 curves per plot titled by loss and latency_us"; fails=$((fails + 1)); }
  # --sample-us adds timeseries.png: SA queue depth above, retransmissions below (900x900).
  check sim-plots-timeseries 0 "wrote pt/timeseries.png" -- "$U" sim --out pt --connections 20 --loss 0,0.05 --sample-us 100
  read -r w h < <(od -An -tu1 -j16 -N8 pt/timeseries.png | awk '{ print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8 }')
  [[ "$w" -eq 900 && "$h" -eq 900 ]] || { echo "FAIL sim-plots: timeseries.png is ${w}x${h}, wanted 900x900"; fails=$((fails + 1)); }
  [[ $(grep -o "timeseries.dat' index 1 using" pt/plots.gp | wc -l) -eq 2 ]] ||
    { echo "FAIL sim-plots: plots.gp lacks the two time-series plots"; fails=$((fails + 1)); }
fi

# sim --progress: always draws on stderr even when it is not a terminal, and
# changes nothing in the results.
check sim-progress 0 "" -- "$U" sim --out pr1 --connections 30 --loss 0,0.05 --no-plots --progress=always
grep -qE "\] run 2/2 loss 0.05: 30/30 connections" err.txt || { echo "FAIL --progress=always drew no bar on stderr"; head -c 300 err.txt; fails=$((fails + 1)); }
[[ $(tr '\r' '\n' < err.txt | grep -c "run [12]/2") -ge 4 ]] || { echo "FAIL --progress=always: fewer than 4 updates"; fails=$((fails + 1)); }
# The status line: connections settled, the run's virtual time, the sweep's wall time.
grep -qE "run 2/2 loss 0.05: 30/30 connections, [0-9]+\.[0-9] ms virtual, [0-9]+\.[0-9] s wall" err.txt || { echo "FAIL --progress line lacks virtual / wall time: $(tail -1 err.txt)"; fails=$((fails + 1)); }
check sim-progress-never 0 "" -- "$U" sim --out pr2 --connections 30 --loss 0,0.05 --no-plots --progress=never
[[ ! -s err.txt ]] || { echo "FAIL --progress=never wrote to stderr"; fails=$((fails + 1)); }
check sim-progress-auto 0 "" -- "$U" sim --out pr3 --connections 30 --loss 0,0.05 --no-plots
[[ ! -s err.txt ]] || { echo "FAIL --progress=auto drew on a non-terminal stderr"; fails=$((fails + 1)); }
for f in connections.csv summary.csv; do
  cmp -s pr1/$f pr2/$f && cmp -s pr1/$f pr3/$f || { echo "FAIL --progress changed $f"; fails=$((fails + 1)); }
done

# topo: fat-tree net files; sim --hosts past one core and two leaves builds one.
check topo-2 0 "2-level fat tree, radix 8, 24 hosts on 6 leaves \(4 down, 4 up\), 4 spines; 10 switches" -- "$U" topo --hosts=24 --radix=8 --out ft2.net
[[ $(grep -c '^Hca' ft2.net) -eq 24 && $(grep -c '^Switch' ft2.net) -eq 10 ]] || { echo "FAIL topo-2 file: $(grep -c '^Switch' ft2.net) switches, $(grep -c '^Hca' ft2.net) CAs"; fails=$((fails + 1)); }
check topo-3 0 "3-level fat tree, radix 8, 48 hosts on 12 leaves \(4 down, 4 up\), 16 cores, 3 pods, 12 aggregation switches; 40 switches" -- "$U" topo --hosts=48 --radix=8 --levels=3 --out ft3.net
check topo-stdout 0 "^Switch" -- "$U" topo --hosts=30 --radix=8 --oversubscription=3
check topo-too-many 2 "700 hosts need 39 leaves; a 2-level fat tree of radix 36 has at most 36 leaves \(648 hosts\): use 3 levels" -- "$U" topo --hosts=700
check topo-no-hosts 2 "--hosts is required" -- "$U" topo
check sim-fat-tree-file 0 "wrote ft/connections.csv" -- "$U" sim --topology ft3.net --hosts 48 --connections 100 --loss 0 --no-plots --out ft
check sim-hosts-fat-tree 0 "wrote big/connections.csv" -- "$U" sim --hosts 700 --connections 700 --loss 0 --no-plots --out big
grep -q '"core 1"' big/topology.net || { echo "FAIL sim --hosts=700 did not build a fat tree"; fails=$((fails + 1)); }
[[ $(grep -c ',established,' big/connections.csv) -eq 700 ]] || { echo "FAIL sim --hosts=700: not 700 established"; fails=$((fails + 1)); }

# sim experiment dimensions: traffic pattern and arrivals are swept columns.
check sim-patterns 0 "pattern incast, arrivals storm" -- "$U" sim --hosts 6 --connections 60 --loss 0 --pattern ring,all-to-all,incast,random --arrivals fixed,storm,poisson --group 4 --no-plots --out pat1
head -1 pat1/summary.csv | grep -q "^loss,pattern,arrivals,connections," || { echo "FAIL pattern columns: $(head -1 pat1/summary.csv)"; fails=$((fails + 1)); }
[[ $(($(wc -l < pat1/summary.csv) - 1)) -eq 12 ]] || { echo "FAIL patterns: wanted 12 runs"; fails=$((fails + 1)); }
[[ $(grep -c '^0,incast,fixed,' pat1/connections.csv) -eq 60 ]] || { echo "FAIL wanted 60 incast rows"; fails=$((fails + 1)); }
# incast: every connection's server is the same host.
[[ $(grep '^0,incast,fixed,' pat1/connections.csv | cut -d, -f6 | sort -u | wc -l) -eq 1 ]] || { echo "FAIL incast has several servers"; fails=$((fails + 1)); }
check sim-patterns-again 0 "" -- "$U" sim --hosts 6 --connections 60 --loss 0 --pattern ring,all-to-all,incast,random --arrivals fixed,storm,poisson --group 4 --no-plots --out pat2
cmp -s pat1/connections.csv pat2/connections.csv || { echo "FAIL patterns: same seed, different CSV"; fails=$((fails + 1)); }
check sim-bad-pattern 2 "--pattern: 'mesh': expected ring, all-to-all, incast or random" -- "$U" sim --pattern ring,mesh
check sim-bad-arrivals 2 "--arrivals: 'burst': expected fixed, storm or poisson" -- "$U" sim --arrivals burst
check sim-sa-server 0 "pattern incast" -- "$U" sim --hosts 8 --connections 200 --loss 0 --pattern ring,incast --arrivals storm --sa-service-us 5 --sa-queue-limit 4 --no-plots --out saq
head -1 saq/summary.csv | grep -q ",virtual_ms,sa_wait_mean_us,sa_max_queue,sa_dropped$" || { echo "FAIL SA server columns: $(head -1 saq/summary.csv)"; fails=$((fails + 1)); }
# A storm against a queue of 4: full queue, drops, the clients' retries still connect everyone.
[[ "$(tail -n +2 saq/summary.csv | cut -d, -f4,17 | sort -u)" == "200,4" ]] || { echo "FAIL SA queue limit: $(cut -d, -f4,17,18 saq/summary.csv | tr '\n' ' ')"; fails=$((fails + 1)); }
[[ $(tail -n +2 saq/summary.csv | cut -d, -f18 | sort -n | head -1) -gt 0 ]] || { echo "FAIL SA queue limit: nothing dropped"; fails=$((fails + 1)); }
# --sa-queue-limit is a swept list: no limit drops nothing; the run with 4 is saq's incast run.
check sim-sa-queue-limits 0 "sa_queue_limit 4" -- "$U" sim --hosts 8 --connections 200 --loss 0 --pattern incast --arrivals storm --sa-service-us 5 --sa-queue-limit 0,4 --no-plots --out saql
head -1 saql/summary.csv | grep -q "^loss,sa_queue_limit,connections," || { echo "FAIL sa_queue_limit column: $(head -1 saql/summary.csv)"; fails=$((fails + 1)); }
[[ "$(grep '^0,0,' saql/summary.csv | cut -d, -f18)" == "0" ]] || { echo "FAIL no queue limit dropped: $(grep '^0,0,' saql/summary.csv)"; fails=$((fails + 1)); }
[[ "$(grep '^0,4,' saql/summary.csv | cut -d, -f3-)" == "$(grep '^0,incast,' saq/summary.csv | cut -d, -f3-)" ]] || { echo "FAIL the limit-4 run differs from saq's incast run"; fails=$((fails + 1)); }
check sim-bad-queue-limit 2 "--sa-queue-limit: 'x' is not an integer" -- "$U" sim --sa-queue-limit 4,x

# sim CM timer profiles, CM retries and the SA client's path cache are swept columns.
prof=(sim --hosts 8 --connections 200 --loss 0.02 --cm-profile spec,linux,lowlat --cm-retries 0,15 --path-cache off,on --no-plots)
check sim-cm-profiles 0 "cm_profile lowlat, cm_retries 15, path_cache on" -- "$U" "${prof[@]}" --out prof1
head -1 prof1/summary.csv | grep -q "^loss,cm_profile,cm_retries,path_cache,connections,.*,virtual_ms,path_cache_hits$" || { echo "FAIL profile columns: $(head -1 prof1/summary.csv)"; fails=$((fails + 1)); }
[[ $(($(wc -l < prof1/summary.csv) - 1)) -eq 12 ]] || { echo "FAIL profiles: wanted 12 runs"; fails=$((fails + 1)); }
# No CM retries: lost REQs / REPs fail connections; 15: none fails.
[[ "$(awk -F, '$3 == 0 && $8 == 0' prof1/summary.csv)$(awk -F, '$3 == 15 && $8 != 0' prof1/summary.csv)" == "" ]] || { echo "FAIL cm_retries: $(cut -d, -f2,3,8 prof1/summary.csv | tr '\n' ' ')"; fails=$((fails + 1)); }
# The cache answers most queries when on, none when off.
[[ "$(awk -F, 'NR > 1 && ($4 == "on") != ($18 > 0)' prof1/summary.csv)" == "" ]] || { echo "FAIL path cache hits: $(cut -d, -f4,18 prof1/summary.csv | tr '\n' ' ')"; fails=$((fails + 1)); }
# Longest setup (a REQ lost twice): spec waits 4.3 s a try, Linux 4.1 s (ms rounding), lowlat 8.4 ms.
awk -F, '$2 != "cm_profile" && $3 == 15 && $4 == "off" { m[$2] = $12 } END { exit !(m["spec"] > m["linux"] && m["linux"] > m["lowlat"]) }' prof1/summary.csv || { echo "FAIL profile ordering: $(cut -d, -f2-4,12 prof1/summary.csv | tr '\n' ' ')"; fails=$((fails + 1)); }
check sim-cm-profiles-again 0 "" -- "$U" "${prof[@]}" --out prof2
cmp -s prof1/connections.csv prof2/connections.csv || { echo "FAIL profiles: same seed, different CSV"; fails=$((fails + 1)); }
check sim-bad-profile 2 "--cm-profile: 'fast': expected spec, linux or lowlat" -- "$U" sim --cm-profile spec,fast
check sim-bad-retries 2 "--cm-retries: '16' is not an integer in \[0, 15\]" -- "$U" sim --cm-retries 16
check sim-bad-path-cache 2 "--path-cache: 'yes': expected on or off" -- "$U" sim --path-cache yes

# sim --procs-per-host: N uscm processes per host behind the host's MAD router
# (cm/router). One process per host is the old host: this sweep's CSVs are the
# snapshot the one-process simulator wrote before the router was in it (cc3a0a0).
one=(sim --hosts 8 --connections 200 --loss 0,0.02 --pattern ring,incast --arrivals storm --sa-service-us 2 --no-plots)
check sim-procs-one 0 "pattern incast" -- "$U" "${one[@]}" --procs-per-host 1 --out pp1
[[ "$(md5sum < pp1/connections.csv | cut -c1-32)" == 05b66049b2172d4b1eeb6a73cb542dda ]] || { echo "FAIL --procs-per-host 1: connections.csv is not the snapshot"; fails=$((fails + 1)); }
[[ "$(md5sum < pp1/summary.csv | cut -c1-32)" == 31902562167261d9c987f248c32b7e2d ]] || { echo "FAIL --procs-per-host 1: summary.csv is not the snapshot"; fails=$((fails + 1)); }
procs=(sim --hosts 4 --connections 200 --loss 0,0.05 --arrivals storm --procs-per-host 1,4 --cm-profile lowlat --no-plots)
check sim-procs 0 "loss 0.05, procs_per_host 4" -- "$U" "${procs[@]}" --out pp2
head -1 pp2/summary.csv | grep -q "^loss,procs_per_host,connections,.*,virtual_ms,router_to_clients,router_unroutable,router_refused$" || { echo "FAIL procs columns: $(head -1 pp2/summary.csv)"; fails=$((fails + 1)); }
# Everyone connects; the routers handed frames to processes only with 4; none unroutable or refused.
[[ "$(awk -F, 'NR > 1 { print $2, $4, ($16 > 0), $17, $18 }' pp2/summary.csv | sort -u | tr '\n' ' ')" == "1 200 0 0 0 4 200 1 0 0 " ]] || { echo "FAIL procs runs: $(cut -d, -f1,2,4,16-18 pp2/summary.csv | tr '\n' ' ')"; fails=$((fails + 1)); }
# The processes are named host/pN and each of the 4 of a host is used.
[[ $(awk -F, '$2 == 4 { print $4 }' pp2/connections.csv | sort -u | grep -c '/p[0-3]$') -eq 16 ]] || { echo "FAIL procs: not 16 client processes"; fails=$((fails + 1)); }
check sim-procs-again 0 "" -- "$U" "${procs[@]}" --out pp3
cmp -s pp2/connections.csv pp3/connections.csv && cmp -s pp2/summary.csv pp3/summary.csv || { echo "FAIL procs: same seed, different CSV"; fails=$((fails + 1)); }
check sim-bad-procs 2 "--procs-per-host: '256' is not an integer in \[1, 255\]" -- "$U" sim --procs-per-host 1,256

# sim outputs over virtual time: setup_cdf.csv always; with --sample-us, the SA
# queue depth and the retransmissions so far every N us (timeseries.csv).
ts=(sim --hosts 64 --connections 1000 --loss 0.01 --pattern random --arrivals storm --sa-service-us 20 --sa-queue-limit 32 --no-plots)
check sim-timeseries 0 "wrote ts1/setup_cdf.csv and ts1/timeseries.csv" -- "$U" "${ts[@]}" --sample-us 1000 --out ts1
check sim-timeseries-off 0 "wrote ts2/setup_cdf.csv$" -- "$U" "${ts[@]}" --out ts2
# Sampling only reads: the same connections and summary without it.
cmp -s ts1/connections.csv ts2/connections.csv && cmp -s ts1/summary.csv ts2/summary.csv || { echo "FAIL --sample-us changed the results"; fails=$((fails + 1)); }
[[ ! -e ts2/timeseries.csv ]] || { echo "FAIL timeseries.csv without --sample-us"; fails=$((fails + 1)); }
head -1 ts1/timeseries.csv | grep -qx "loss,t_ms,settled,sa_queue,sa_dropped,sa_retries,cm_retransmissions" || { echo "FAIL timeseries columns: $(head -1 ts1/timeseries.csv)"; fails=$((fails + 1)); }
# Every ms from 0 until everything settled; the storm fills the queue of 32; counts never fall.
awk -F, 'NR > 1 { if ($2 != sprintf("%.3f", NR - 2) || $3 < s || $5 < d || $6 < r || $7 < c) bad = 1; s = $3; d = $5; r = $6; c = $7; if ($4 > q) q = $4 }
  END { exit !(!bad && q == 32 && s == 1000 && d > 0 && r > 0) }' ts1/timeseries.csv || { echo "FAIL timeseries rows: $(sed -n '2,4p;$p' ts1/timeseries.csv | tr '\n' ' ')"; fails=$((fails + 1)); }
# The CDF: one row per connection that got a setup time, sorted, ending at 1.
settled=$(tail -1 ts1/summary.csv | awk -F, '{ print $3 + $4 }')
head -1 ts1/setup_cdf.csv | grep -qx "loss,setup_us,fraction" || { echo "FAIL setup_cdf columns"; fails=$((fails + 1)); }
[[ $(($(wc -l < ts1/setup_cdf.csv) - 1)) -eq $settled && "$(tail -1 ts1/setup_cdf.csv | cut -d, -f3)" == "1.00000" ]] || { echo "FAIL setup_cdf rows ($settled settled)"; fails=$((fails + 1)); }
tail -n +2 ts1/setup_cdf.csv | cut -d, -f2 | sort -c -g || { echo "FAIL setup_cdf not sorted"; fails=$((fails + 1)); }

# sim sweep snapshot: every swept dimension in two small sweeps (all runs
# under a second). The MD5s of every file they write but the PNGs (gnuplot's
# bytes), and of their stdout, are those the sweep wrote before its nested
# loops became a list of dimensions (tools/sim_sweep.h; at 2da1895).
"$U" topo --hosts=12 --radix=8 --out snap-ft2.net >/dev/null
"$U" topo --hosts=16 --radix=4 --levels=3 --out snap-ft3.net >/dev/null
check sim-snapshot-link 0 "" -- "$U" sim --out snap1 --seed 2 --connections 6 --loss 0,0.1 --duplicate 0,0.1 --latency-us 0.5,3 --jitter-us 0,2 --hosts 3,5 --topology snap-ft2.net,snap-ft3.net
cp out.txt snap1.stdout
check sim-snapshot-experiment 0 "" -- "$U" sim --out snap2 --seed 3 --connections 6 --hosts 4 --loss 0.05 --pattern ring,incast --arrivals storm,poisson --sa-service-us 3 --sa-queue-limit 0,2 --path-cache off,on --cm-retries 1,15 --cm-profile linux,lowlat --procs-per-host 1,2 --sample-us 200000
cp out.txt snap2.stdout
snap="${TEST_SRCDIR:-$PWD}/${TEST_WORKSPACE:-__main__}/tools/sim_sweep_snapshot.md5"
[[ -f "$snap" ]] || snap="$(dirname "$0")/sim_sweep_snapshot.md5"
md5sum --quiet -c "$snap" >md5.txt 2>&1 || { echo "FAIL sim snapshot: $(tr '\n' ' ' < md5.txt)"; fails=$((fails + 1)); }

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
