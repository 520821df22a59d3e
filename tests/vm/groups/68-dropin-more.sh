#!/usr/bin/env bash
# Programs that link librdmacm which issue 13 does not name, unmodified, on uscm's
# drop-in librdmacm.so.1 through `uscm exec` (VM b, no kernel CM) against the kernel CM
# (VM a). What runs (docs/API.md "Other programs"):
#   1. qperf 0.4.11 (`-cm1`: RC connection through the RDMA CM), `rc_bw rc_lat`: the
#      kernel's qperf server <- the drop-in client, then the drop-in server <- the
#      kernel's client (`-to 60`: qperf's 5 s default is shorter than a forked server
#      child's first call under TCG; `-t 3`: with `-t 1` at host load 15 it once
#      measured `bw = 0 bytes/sec`, not diagnosed). The server child destroys its
#      listener and the channel, never the accepted id: the drop-in's channel destroy
#      must answer the client's DREQ, as the kernel's close of the fd does (docs/API.md).
#   2. libfabric 1.17's verbs provider, MSG endpoint (`fi_pingpong -p verbs -e msg`:
#      rdma_cm connection, 100 x 64 B ping-pong): both ways. The drop-in server needs
#      rdma_bind_addr to 127.0.0.1 to work as in the kernel (libfabric binds
#      "localhost" while it picks the passive endpoint's address).
#   3. UCX 1.13's io_demo (UCP over the rdmacm sockaddr CM, its own QP moved with
#      rdma_init_qp_attr: the RTR AV's source GID index must be the id's RoCE v2 GID):
#      100 iterations of 64 B, both ways.
#   4. rdma-core's rdma_xserver / rdma_xclient (rdmacm-utils; rdma_getaddrinfo,
#      rdma_create_ep, rdma_get_request, synchronous calls, one message): RC both
#      ways; then `-c x` (XRC, an RDMA_PS_IB id on the IPv4 answer) on each side's
#      own CM: rxe has no XRC, so the kernel's and the drop-in's client both end at
#      "rdma_create_ep: Operation not supported" (the drop-in refused the id's
#      address with EINVAL before, docs/API.md "Addressing").
# Out: fi_pingpong -e rdm -p "verbs;ofi_rxm" fails on the kernel CM too under rxe
# ("Unable to create verbs CQ").
# Checked: exit status 0 and each program's result lines.
# Readiness: qperf's and fi_pingpong's TCP control ports listen (their servers open
# the RDMA side only when a client has come through that socket); io_demo's kernel
# listener in `rdma resource`, the drop-in's "listening on" line (USCM_DEBUG=1).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 600
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
FI=(fi_pingpong -p verbs -e msg -I 100 -S 64)
IO=(io_demo -i 100 -d 64:64)
IO_PORT=1337   # io_demo's default port
QPERF_PORT=19765 FI_PORT=47592   # the programs' default control ports
X_PORT=7473 XRC_PORT=7474

# tcp_listening PORT: until a TCP socket listens on PORT here, for at most $T seconds
tcp_listening() {
  local i
  for ((i = 0; i < T * 10; i++)); do
    [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  echo "nothing listens on TCP port $1 after ${T}s" >&2; return 1
}
# pingpong_ok NAME LOG: fi_pingpong's result line: 64-byte messages, 100 sent, 100 acked
pingpong_ok() { has_lines "$1" "$2" '^64 +100 +=100 ' 1; }
# io_ok NAME LOG: io_demo's client ended its 100 iterations without an error
io_ok() { has_lines "$1" "$2" "Client exit with status 'OK'" 1; }

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules

  # 1. qperf: the server serves until stopped
  timeout $T qperf > /tmp/qperf-s.log 2>&1 & pid=$!
  tcp_listening $QPERF_PORT && sync.sh signal kernel-qperf-ready
  sync.sh wait dropin-qperf-done $T
  kill "$pid"; wait "$pid" 2>/dev/null
  sync.sh wait dropin-qperf-ready $T
  run_to kernel-qperf-to-dropin /tmp/qperf-c.log \
    timeout $T qperf -cm1 -t 3 -to 60 "$PEER" rc_bw rc_lat
  sync.sh signal kernel-qperf-done
  has_lines kernel-qperf-rc_bw /tmp/qperf-c.log '^ +bw += +[0-9.]+ [KMG]?B/sec$' 1
  has_lines kernel-qperf-rc_lat /tmp/qperf-c.log '^ +latency += +[0-9.]+ (ns|us|ms|sec)$' 1

  # 2. fi_pingpong, kernel server <- drop-in client, then the other way
  timeout $T "${FI[@]}" > /tmp/fi-s.log 2>&1 & pid=$!
  tcp_listening $FI_PORT && sync.sh signal kernel-fi-ready
  finish kernel-fi_pingpong-served-dropin "$pid" /tmp/fi-s.log
  pingpong_ok kernel-fi_pingpong-server-result /tmp/fi-s.log
  sync.sh wait dropin-fi-ready $T
  run_to kernel-fi_pingpong-to-dropin /tmp/fi-c.log timeout $T "${FI[@]}" "$PEER"
  pingpong_ok kernel-fi_pingpong-client-result /tmp/fi-c.log

  # 3. UCX io_demo, kernel server <- drop-in client, then the other way
  timeout $T "${IO[@]}" > /tmp/io-s.log 2>&1 & pid=$!
  kernel_listening $IO_PORT && sync.sh signal kernel-io-ready
  sync.sh wait dropin-io-done $T
  kill "$pid"; wait "$pid" 2>/dev/null
  sync.sh wait dropin-io-ready $T
  run_to kernel-io_demo-to-dropin /tmp/io-c.log timeout $T "${IO[@]}" "$PEER"
  io_ok kernel-io_demo-client-result /tmp/io-c.log
  sync.sh signal kernel-io-done

  # 4. rdma_xserver / rdma_xclient, kernel server <- drop-in client, then the other way
  timeout $T rdma_xserver -p $X_PORT > /tmp/xs.log 2>&1 & pid=$!
  kernel_listening $X_PORT && sync.sh signal kernel-x-ready
  finish kernel-rdma_xserver-served-dropin "$pid" /tmp/xs.log
  has_lines kernel-rdma_xserver-result /tmp/xs.log '^rdma_xserver: end 0$' 1
  sync.sh wait dropin-x-ready $T
  run_to kernel-rdma_xclient-to-dropin /tmp/xc.log timeout $T rdma_xclient -s "$PEER" -p $X_PORT
  has_lines kernel-rdma_xclient-result /tmp/xc.log '^rdma_xclient: end 0$' 1
  timeout $T rdma_xclient -s "$PEER" -p $XRC_PORT -c x > /tmp/xrc.log 2>&1
  has_lines kernel-rdma_xclient-xrc-unsupported /tmp/xrc.log \
    '^rdma_create_ep: Operation not supported$' 1
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  no_kernel_cm no-kernel-cm-b

  # 1. qperf
  sync.sh wait kernel-qperf-ready $T
  run_to dropin-qperf-to-kernel /tmp/qperf-c.log \
    "${USCM[@]}" qperf -cm1 -t 1 "$PEER" rc_bw rc_lat
  sync.sh signal dropin-qperf-done
  has_lines dropin-qperf-rc_bw /tmp/qperf-c.log '^ +bw += +[0-9.]+ [KMG]?B/sec$' 1
  has_lines dropin-qperf-rc_lat /tmp/qperf-c.log '^ +latency += +[0-9.]+ (ns|us|ms|sec)$' 1
  "${USCM[@]}" qperf > /tmp/qperf-s.log 2>&1 & pid=$!
  tcp_listening $QPERF_PORT && sync.sh signal dropin-qperf-ready
  sync.sh wait kernel-qperf-done $T
  kill "$pid"; wait "$pid" 2>/dev/null

  # 2. fi_pingpong
  sync.sh wait kernel-fi-ready $T
  run_to dropin-fi_pingpong-to-kernel /tmp/fi-c.log "${USCM[@]}" "${FI[@]}" "$PEER"
  pingpong_ok dropin-fi_pingpong-client-result /tmp/fi-c.log
  "${USCM[@]}" "${FI[@]}" > /tmp/fi-s.log 2>&1 & pid=$!
  tcp_listening $FI_PORT && sync.sh signal dropin-fi-ready
  finish dropin-fi_pingpong-served-kernel "$pid" /tmp/fi-s.log
  pingpong_ok dropin-fi_pingpong-server-result /tmp/fi-s.log

  # 3. UCX io_demo
  sync.sh wait kernel-io-ready $T
  run_to dropin-io_demo-to-kernel /tmp/io-c.log "${USCM[@]}" "${IO[@]}" "$PEER"
  io_ok dropin-io_demo-client-result /tmp/io-c.log
  sync.sh signal dropin-io-done
  "${USCM[@]}" "${IO[@]}" > /tmp/io-s.log 2>&1 & pid=$!
  wait_for /tmp/io-s.log 'listening on' && sync.sh signal dropin-io-ready
  sync.sh wait kernel-io-done $T
  kill "$pid"; wait "$pid" 2>/dev/null

  # 4. rdma_xserver / rdma_xclient
  sync.sh wait kernel-x-ready $T
  run_to dropin-rdma_xclient-to-kernel /tmp/xc.log "${USCM[@]}" rdma_xclient -s "$PEER" -p $X_PORT
  has_lines dropin-rdma_xclient-result /tmp/xc.log '^rdma_xclient: end 0$' 1
  "${USCM[@]}" rdma_xserver -p $X_PORT > /tmp/xs.log 2>&1 & pid=$!
  wait_for /tmp/xs.log 'listening on' "$pid" && sync.sh signal dropin-x-ready
  finish dropin-rdma_xserver-served-kernel "$pid" /tmp/xs.log
  has_lines dropin-rdma_xserver-result /tmp/xs.log '^rdma_xserver: end 0$' 1
  "${USCM[@]}" rdma_xclient -s "$PEER" -p $XRC_PORT -c x > /tmp/xrc.log 2>&1
  has_lines dropin-rdma_xclient-xrc-unsupported /tmp/xrc.log \
    '^rdma_create_ep: Operation not supported$' 1

  check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
