#!/usr/bin/env bash
# A drop-in program killed without destroying its ids (issue 13): its peer gets what the
# kernel sends on process exit. Two linked VMs: a runs the kernel CM and Debian's
# `rping -s -d -v` (serves until its client goes); b, with no kernel CM, runs
# `uscm exec -- rping -c -v` (no -C: it pings until stopped), which starts uscmd for rxe0
# (--idle-exit 5) and routes the drop-in through it. After a few pings b kill -9s rping:
# uscmd sees the client's socket close and sends a DREQ for the established connection,
# so the kernel's rping reports DISCONNECTED within the step bound (nothing else would
# tell it: its peer is idle). Then uscmd, with no client left, exits by itself and its
# counters show the one cleanup DREQ.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
T=120   # seconds for any one step (loaded 2-core host, TCG)
PORT=7190

if [ "$USCM_VM_ROLE" = a ]; then
  timeout $T rping -s -d -v -a "$IP" -p $PORT > /tmp/rping-s.log 2>&1 & pid=$!
  kernel_listening $PORT && sync.sh signal kernel-server-ready
  sync.sh wait client-killed $T
  # The disconnect reaches rping -s promptly: DISCONNECTED within the step bound, not
  # the minutes of the CM's timeouts (without uscmd's DREQ nothing would come at all).
  wait_for /tmp/rping-s.log 'DISCONNECT EVENT' &&
    pass kernel-saw-disconnect || fail kernel-saw-disconnect "no DISCONNECTED within ${T}s"
  # rping -s then usually exits; seen once it did not: its CQ thread, which only a
  # failed work completion ends, waited on (a flushed receive does not end it) and the
  # main thread joined it. rping's own teardown, not the CM's: not a check.
  if kill -0 "$pid" 2>/dev/null; then echo "  (rping -s still running after the disconnect: stopped)"; kill "$pid"; fi
  wait "$pid" 2>/dev/null
  check_output kernel-server-pinged 'server ping data: rdma-ping-0: ' cat /tmp/rping-s.log
  echo "$FAILED" | sync.sh put a-failed
else
  check no-kernel-cm-b bash -c '! lsmod | grep -Ewq "^(ib_cm|rdma_cm|rdma_ucm)"'
  sync.sh wait kernel-server-ready $T
  # uscm exec replaces itself with rping: $! is rping's pid
  "$USCM_VM_BIN/tools/uscm" exec --idle-exit 5 -- \
    rping -c -v -a "$PEER" -I "$IP" -p $PORT > /tmp/rping-c.log 2>&1 & pid=$!
  wait_for /tmp/rping-c.log 'ping data: rdma-ping-2: ' &&
    pass dropin-client-pinging || fail dropin-client-pinging "no third ping"
  check_output routed-through-uscmd "rxe0 port 1" cat /tmp/uscmd-rxe0-1.log
  kill -9 "$pid"; wait "$pid" 2>/dev/null
  sync.sh signal client-killed
  # uscmd: no client left, so it exits 5 s later and prints its counters
  wait_for /tmp/uscmd-rxe0-1.log 'exiting \(--idle-exit\)' &&
    pass uscmd-idle-exit || fail uscmd-idle-exit "uscmd did not exit by itself"
  check_output uscmd-sent-cleanup-dreq 'cleanup REJ 0 DREQ 1;' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
fi
group_end
