#!/usr/bin/env bash
# Both ends of a connection on one port: a server and a client on one host connecting
# to the host's own IP on one RDMA device (loopback through the HCA: the CM's MADs go
# out on QP1 and come back to the same port). One VM, both ends on rxe1's IP
# (192.168.77.2), first on the kernel CM (the reference), then, with ib_cm, rdma_cm and
# rdma_ucm unloaded, on uscm's drop-in through `uscm exec`: Debian's rping -s and
# rping -c -v -C 10, then ucmatose's server and client. On uscm both programs are
# clients of rxe1's one uscmd (the first `uscm exec` starts it): the REQ one sends to
# its own port leaves on the wire, rxe loops it back, and uscmd routes it in to the
# listener, as any REQ. Then rxe1 is deleted and added back while that uscmd runs and
# has a client (so no idle exit): it must exit by itself and say why (its umad file
# reads EIO once the device is gone), and rping's two ends on rxe1 again connect
# through the uscmd the next `uscm exec` starts. Before, the old uscmd lived on serving nothing and the next
# programs found its socket: the client's UNREACHABLE -110.
# Checked: every program exits 0, rping's 10 data lines byte for byte on both ends,
# ucmatose's "data transfers complete" / "return status 0" on both ends.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_boot --cm --timeout 600
. "$VM_DIR/dropin.sh"

S=192.168.77.2 N=10

# rping_pair MODE PORT RUN...: rping's server and client, both on $S
rping_pair() {
  local mode=$1 port=$2 s c; shift 2
  "$@" rping -s -a $S -p "$port" -v > /tmp/$mode-rping-s.log 2>&1 & s=$!
  if [[ $mode == kernel* ]]; then kernel_listening "$port"; else
    wait_for /tmp/$mode-rping-s.log 'listening on' $s
  fi
  "$@" rping -c -a $S -p "$port" -v -C $N > /tmp/$mode-rping-c.log 2>&1 & c=$!
  finish "$mode-rping-client" $c /tmp/$mode-rping-c.log
  finish_rping_server "$mode-rping-server" $s /tmp/$mode-rping-s.log
  check_pings "$mode-rping-client-data" /tmp/$mode-rping-c.log 'ping data: ' $N
  check_pings "$mode-rping-server-data" /tmp/$mode-rping-s.log 'server ping data: ' $N
}

# ucmatose_pair MODE PORT RUN...: ucmatose's server and client, both on $S
ucmatose_pair() {
  local mode=$1 port=$2 s c side; shift 2
  "$@" ucmatose -b $S -p "$port" > /tmp/$mode-ucmatose-s.log 2>&1 & s=$!
  if [[ $mode == kernel* ]]; then kernel_listening "$port"; else
    wait_for /tmp/$mode-ucmatose-s.log 'listening on' $s
  fi
  "$@" ucmatose -s $S -b $S -p "$port" > /tmp/$mode-ucmatose-c.log 2>&1 & c=$!
  finish "$mode-ucmatose-client" $c /tmp/$mode-ucmatose-c.log
  finish "$mode-ucmatose-server" $s /tmp/$mode-ucmatose-s.log
  for side in s c; do
    has_lines "$mode-ucmatose-$side-data" /tmp/$mode-ucmatose-$side.log '^data transfers complete$' 1
    has_lines "$mode-ucmatose-$side-status" /tmp/$mode-ucmatose-$side.log '^return status 0$' 1
  done
}

check kernel-cm-loaded grep -qw rdma_ucm /proc/modules
rping_pair kernel 7430 timeout "$T"
ucmatose_pair kernel 7431 timeout "$T"
check unload-kernel-cm modprobe -r rdma_ucm rdma_cm ib_cm
no_kernel_cm no-kernel-cm
rping_pair uscm 7440 "${USCM[@]}"
ucmatose_pair uscm 7441 "${USCM[@]}"

# rxe1 deleted and added back while its uscmd runs, with a client connected to it (a
# bare socket connection holds off its idle exit, as a program on another port would)
old=$(pgrep -f "uscmd --ca rxe1 --port 1")
check uscmd-rxe1-running test -n "$old"
python3 -c 'import signal, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])
print("connected", flush=True); signal.pause()' /tmp/uscmd-rxe1-1.sock > /tmp/hold.log 2>&1 &
hold=$!
check client-of-uscmd-rxe1 wait_for /tmp/hold.log '^connected$' $hold
check del-rxe1 rdma link del rxe1
check add-rxe1 rdma link add rxe1 type rxe netdev veth1
check rxe1-active wait_for /sys/class/infiniband/rxe1/ports/1/state ACTIVE
check uscmd-rxe1-exits gone "${old:-0}"
stop_pid $hold
check_output uscmd-rxe1-says-why 'uscmd: rxe1 port 1 is gone: its umad file reads' \
  cat /tmp/uscmd-rxe1-1.log
rping_pair uscm-rxe1-added-back 7450 "${USCM[@]}"
group_end
