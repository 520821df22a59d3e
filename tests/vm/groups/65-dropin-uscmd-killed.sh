#!/usr/bin/env bash
# A port's uscmd killed (SIGKILL) while its device stays and a drop-in server runs: the
# server keeps listening, as the kernel's listener does (its CM never goes away). One VM
# (rxe0 192.168.77.1 <-veth-> veth1 192.168.77.2, rxe1), ib_cm, rdma_cm and rdma_ucm
# unloaded. Debian's `rping -s -a 0.0.0.0` through `uscm exec` listens on both ports
# (its wildcard listen starts both uscmds); one port's uscmd is killed with SIGKILL; the
# drop-in sees the port's MAD path lost (its socket closed), opens the port again through
# a new uscmd started on demand (the server's uscm-ports thread) and puts the listen back
# on it (its USCM_DEBUG line "listening on 0.0.0.0 port P (DEV:1, opened again: its
# uscmd exited)" is the readiness line waited on); then `rping -c -v -C 10` to that
# port's address connects to the same server process (pid checked before the client),
# and every data line is checked on both ends. First rxe1 (the listener's listen on
# another port than its own uscm id's), then rxe0 (its own uscm id's port, the first
# listed: the id moves to rxe1's and takes the new rxe0 listen as another). Connections
# made through the dead uscmd are not tested here: they got DEVICE_REMOVAL and their
# peers time out (no uscmd is left to send REJ or DREQ), as with a crashed kernel.
# Before, the server heard nothing on the port again until it restarted (the client's
# REQ went to the new uscmd with no listen claim on it). Then the same with a server bound
# to the port's own address, `rping -s -a IP` (a listener with a device, not a wildcard):
# it gets no DEVICE_REMOVAL and listens again on the port through the new uscmd (its line
# "listening on IP port P (DEV:1, opened again: its uscmd exited)"); before, it got
# DEVICE_REMOVAL (rping exits on it) and no client reached it. Last, a client between
# two connections (gid_moved -c: each connection's id destroyed after its echo) has no id
# on its port, rxe0, when rxe0's uscmd is killed: no DEVICE_REMOVAL tells its drop-in, so
# connection 2's first call asks the port's uscm device, finds its MAD path lost and opens
# the port again through a new uscmd (its USCM_DEBUG line checked); before, connection 2's
# id went to the lost uscm device, its MADs counted as send errors, the server unreached.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
# targets: //tests/vm/behaviour:gid_moved
. "$(dirname "$0")/../lib.sh"
vm_boot --cm --timeout 1000  # four killed uscmds: 682 s at host load 15
. "$VM_DIR/dropin.sh"
B=$USCM_VM_BIN/tests/vm/behaviour

N=10
# The server lives through four steps (its listen, the kill, its listen again, the
# client): their bound, not one step's
SERVER=(env USCM_DEBUG=1 timeout $((3 * T)) "$USCM_VM_BIN/tools/uscm" exec --)

# killed_uscmd DEV IP PORT [BIND]: the server listens on BIND:PORT (0.0.0.0, or IP: a
# server bound to DEV's address), DEV's uscmd is killed, a client to IP:PORT (on DEV)
# connects to the same server. The checks are named DEV-... or DEV-bound-...
killed_uscmd() {
  local dev=$1 ip=$2 port=$3 bind=${4:-0.0.0.0} s c old new rp
  local re=${bind//./\\.}
  [ "$bind" = 0.0.0.0 ] || dev+=-bound
  local d=${dev%-bound}
  "${SERVER[@]}" rping -s -a "$bind" -p "$port" -v > /tmp/$dev-s.log 2>&1 & s=$!
  check "$dev-server-listening" wait_for /tmp/$dev-s.log 'listening on' $s
  rp=$(pgrep -xf "rping -s -a $re -p $port -v")   # rping's own pid (s is timeout's)
  old=$(pgrep -f "uscmd --ca $d --port 1")
  check "$dev-uscmd-running" test -n "$old"
  kill -9 "${old:-0}"
  check "$dev-uscmd-killed" gone "${old:-0}"
  check "$dev-server-listens-again" wait_for /tmp/$dev-s.log \
    "listening on $re port $port \($d:1, opened again: its uscmd exited\)" $s
  new=$(pgrep -f "uscmd --ca $d --port 1")
  check "$dev-new-uscmd" test -n "$new" -a "$new" != "$old"
  check "$dev-same-server" test -n "$rp" -a "$(pgrep -xf "rping -s -a $re -p $port -v")" = "$rp"
  "${USCM[@]}" rping -c -a "$ip" -p "$port" -v -C $N > /tmp/$dev-c.log 2>&1 & c=$!
  finish "$dev-client" $c /tmp/$dev-c.log
  finish_rping_server "$dev-server" $s /tmp/$dev-s.log
  check_pings "$dev-client-data" /tmp/$dev-c.log 'ping data: ' $N
  check_pings "$dev-server-data" /tmp/$dev-s.log 'server ping data: ' $N
}

check unload-kernel-cm modprobe -r rdma_ucm rdma_cm ib_cm
no_kernel_cm no-kernel-cm
killed_uscmd rxe1 192.168.77.2 7460
killed_uscmd rxe0 192.168.77.1 7461
killed_uscmd rxe1 192.168.77.2 7462 192.168.77.2
killed_uscmd rxe0 192.168.77.1 7463 192.168.77.1

# The client between two connections: the server (bound to .2, rxe1's uscmd) takes both;
# the client's port, rxe0, has no id of the client's while its uscmd is killed. The
# kill reaches the client's progress thread (its socket to the uscmd closed) well
# before its next call: `gone` waits for the uscmd's pid to be reaped.
P=7464
"${SERVER[@]}" "$B/gid_moved" -s 192.168.77.2 $P 2 > /tmp/idle-s.log 2>&1 & s=$!
check idle-server-listening wait_for /tmp/idle-s.log '^listening' $s
rm -f /tmp/go; mkfifo /tmp/go
"${USCM[@]}" "$B/gid_moved" -c 192.168.77.1 192.168.77.2 $P < /tmp/go > /tmp/idle-c.log 2>&1 &
c=$!
exec 3> /tmp/go   # the client's stdin: one line once rxe0's uscmd is gone
check idle-first-connection-echo wait_for /tmp/idle-c.log '^connection 1: echo ok' $c
check idle-client-waits wait_for /tmp/idle-c.log '^moved\?' $c
old=$(pgrep -f "uscmd --ca rxe0 --port 1")
check idle-uscmd-running test -n "$old"
kill -9 "${old:-0}"
check idle-uscmd-killed gone "${old:-0}"
echo go >&3
exec 3>&-
finish idle-client $c /tmp/idle-c.log
check idle-second-connection-echo grep -q '^connection 2: echo ok' /tmp/idle-c.log
check idle-port-opened-again grep -qF \
  "rxe0:1's MAD path is lost (its uscmd exited) while the device stays" /tmp/idle-c.log
new=$(pgrep -f "uscmd --ca rxe0 --port 1")
check idle-new-uscmd test -n "$new" -a "$new" != "$old"
finish idle-server $s /tmp/idle-s.log
group_end
