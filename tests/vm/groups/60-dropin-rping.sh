#!/usr/bin/env bash
# Debian's unmodified rping on uscm's drop-in librdmacm.so.1 (issue 13), over Soft-RoCE.
# Two linked VMs: a runs the kernel CM (ib_cm, rdma_cm, rdma_ucm) and the system's
# librdmacm; b has none of them loaded and runs rping with
# LD_LIBRARY_PATH=<bazel-bin>/api/librdmacm, so every rdma_* call is uscm's (umad on QP1,
# path from the IPs: no SA, no kernel CM).
#   1. drop-in rping -c -v -C 10  ->  kernel rping -s -v
#   2. kernel rping -c -v -C 10   ->  drop-in rping -s -v
#   3. rdma_server / rdma_client (synchronous ids, rdma_create_ep with a qp_init_attr,
#      rdma_get_request, the CQs and channels rdma_create_qp makes), then ucmatose
#      (its own CQs, sends 10 x 100 B each way), both directions
#   4. (b alone) drop-in server and drop-in client as two processes on b's one port
#      (rxe0, the client connects to b's own IP; rxe loops it back), installed by
#      tools/install.sh in /tmp/uscm and run with LD_LIBRARY_PATH=/tmp/uscm/lib/uscm only:
#      with USCM_NO_USCMD=1 the second process cannot open the port (the first owns the
#      CM class), checked as such; by default the first program's library starts the
#      port's uscmd (/tmp/uscm/bin/uscmd: its socket and log), the second goes through it,
#      both ping, and the uscmd exits by its own idle timer (30 s after its last client).
#   5. rdma_resolve_addr's failures as rping shows them, kernel (a) and drop-in (b), the same
#      lines: a silent host on the link (ADDR_ERROR, -ETIMEDOUT once ARP gave up) and a
#      destination without a route (the call fails: ENETUNREACH).
#   IPv6 (step 6 here until 2026-11-27): 60-dropin-ipv6.
# Every ping's data line is checked byte for byte (rping's pattern: "rdma-ping-N: "
# then letters from 'A'+N, 63 characters). Readiness: the kernel listener shows in
# `rdma resource show cm_id`; the drop-in says "listening on" with USCM_DEBUG=1.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm //api/c:libuscm.so.0
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 600
. "$(dirname "$0")/../dropin.sh"   # ping_lines, check_pings, finish

LIB=$USCM_VM_BIN/api/librdmacm
IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
T=120   # seconds for any one step: TCG guests on a loaded 2-core host are slow
N=10

# the drop-in's environment; an array, not a function, so that $! of "${DROPIN[@]}" CMD &
# is the process that `kill` stops (timeout passes the signal on to rping)
DROPIN=(env LD_LIBRARY_PATH="$LIB" USCM_DEBUG=1 timeout $T)
# resolve_errors [ENV...]: what rping says when rdma_resolve_addr fails (5.): its event
# line and the call's error. Not its other lines: after the event its cm thread exits
# the process while the main thread prints or destroys the channel, so "waiting for
# addr/route resolution state 1" and "rdma_get_cm_event: Bad file descriptor" come and
# go from run to run on the kernel too.
resolve_errors() {
  { "$@" timeout $T rping -c -a 192.168.78.99 -C 1 2>&1
    "$@" timeout $T rping -c -a 10.99.0.1 -C 1 2>&1; } | grep -E '^(cma event|rdma_resolve_addr)'
}

if [ "$USCM_VM_ROLE" = a ]; then
  check kernel-cm-loaded-a grep -qw rdma_ucm /proc/modules

  # 1. the drop-in's client against the kernel's rping server
  timeout $T rping -s -a "$IP" -p 7174 -v > /tmp/rping-s.log 2>&1 & pid=$!
  kernel_listening 7174 && sync.sh signal kernel-server-ready
  finish kernel-rping-s-served-dropin "$pid" /tmp/rping-s.log
  check_pings kernel-server-data /tmp/rping-s.log 'server ping data: ' $N
  sync.sh wait dropin-client-done $T

  # 2. the kernel's rping client against the drop-in's server
  sync.sh wait dropin-server-ready $T
  timeout $T rping -c -a "$PEER" -I "$IP" -p 7175 -v -C $N > /tmp/rping-c.log 2>&1
  rc=$?; if [ $rc = 0 ]; then pass kernel-rping-c-to-dropin; else
    sed 's/^/  | /' /tmp/rping-c.log | tail -n 30; fail kernel-rping-c-to-dropin "exit $rc"; fi
  check_pings kernel-client-data /tmp/rping-c.log 'ping data: ' $N
  sync.sh signal kernel-client-done

  # 3. rdma_server (kernel) <- rdma_client (drop-in), then the other way round
  timeout $T rdma_server -s "$IP" -p 7300 > /tmp/rdma-server.log 2>&1 & pid=$!
  kernel_listening 7300 && sync.sh signal kernel-rdma-server-ready
  finish kernel-rdma-server-served-dropin "$pid" /tmp/rdma-server.log
  sync.sh wait dropin-rdma-server-ready $T
  check_output kernel-rdma-client-to-dropin '^rdma_client: end 0$' \
    timeout $T rdma_client -s "$PEER" -p 7301
  timeout $T ucmatose -b "$IP" -p 7471 > /tmp/ucmatose-s.log 2>&1 & pid=$!
  kernel_listening 7471 && sync.sh signal kernel-ucmatose-ready
  finish kernel-ucmatose-served-dropin "$pid" /tmp/ucmatose-s.log
  sync.sh wait dropin-ucmatose-ready $T
  check_output kernel-ucmatose-to-dropin '^return status 0$' \
    timeout $T ucmatose -s "$PEER" -b "$IP" -p 7472
  # 5.
  resolve_errors | sync.sh put kernel-resolve-errors

  # b checks this too: a's console lines can be lost (seen once), b's FAIL is not
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done $T
else
  check no-kernel-cm-b bash -c '! lsmod | grep -Ewq "^(ib_cm|rdma_cm|rdma_ucm)"'
  check dropin-loaded bash -c "LD_LIBRARY_PATH=$LIB ldd \$(command -v rping) |
    grep -q '$LIB/librdmacm.so.1'"

  # 1.
  sync.sh wait kernel-server-ready $T
  "${DROPIN[@]}" rping -c -a "$PEER" -I "$IP" -p 7174 -v -C $N > /tmp/dropin-c.log 2>&1
  rc=$?; if [ $rc = 0 ]; then pass dropin-rping-c-to-kernel; else
    sed 's/^/  | /' /tmp/dropin-c.log | tail -n 30; fail dropin-rping-c-to-kernel "exit $rc"; fi
  check_pings dropin-client-data /tmp/dropin-c.log 'ping data: ' $N
  sync.sh signal dropin-client-done

  # 2.
  "${DROPIN[@]}" rping -s -a "$IP" -p 7175 -v > /tmp/dropin-s.log 2>&1 & pid=$!
  wait_for /tmp/dropin-s.log 'listening on' && sync.sh signal dropin-server-ready
  finish dropin-rping-s-served-kernel "$pid" /tmp/dropin-s.log
  check_pings dropin-server-data /tmp/dropin-s.log 'server ping data: ' $N
  sync.sh wait kernel-client-done $T

  # 3.
  sync.sh wait kernel-rdma-server-ready $T
  check_output dropin-rdma-client-to-kernel '^rdma_client: end 0$' \
    "${DROPIN[@]}" rdma_client -s "$PEER" -p 7300
  "${DROPIN[@]}" rdma_server -s "$IP" -p 7301 > /tmp/dropin-rdma-server.log 2>&1 & pid=$!
  wait_for /tmp/dropin-rdma-server.log 'listening on' && sync.sh signal dropin-rdma-server-ready
  finish dropin-rdma-server-served-kernel "$pid" /tmp/dropin-rdma-server.log
  sync.sh wait kernel-ucmatose-ready $T
  check_output dropin-ucmatose-to-kernel '^return status 0$' \
    "${DROPIN[@]}" ucmatose -s "$PEER" -p 7471
  "${DROPIN[@]}" ucmatose -b "$IP" -p 7472 > /tmp/dropin-ucmatose-s.log 2>&1 & pid=$!
  wait_for /tmp/dropin-ucmatose-s.log 'listening on' && sync.sh signal dropin-ucmatose-ready
  finish dropin-ucmatose-served-kernel "$pid" /tmp/dropin-ucmatose-s.log

  # 4. two drop-in programs on the one port of this VM, installed by tools/install.sh and
  # run with LD_LIBRARY_PATH alone: with USCM_NO_USCMD=1 the first owns the port and the
  # second cannot open it ...
  check installed "$VM_DIR/../../tools/install.sh" --from="$USCM_VM_BIN" --prefix=/tmp/uscm
  OWN=(env LD_LIBRARY_PATH=/tmp/uscm/lib/uscm USCM_DEBUG=1 timeout $T)
  env USCM_NO_USCMD=1 "${OWN[@]}" rping -s -a "$IP" -p 7176 -v > /tmp/dropin-s2.log 2>&1 & pid=$!
  wait_for /tmp/dropin-s2.log 'listening on'
  check_output opt-out-second-process-needs-uscmd 'CM class.*uscmd' \
    env USCM_NO_USCMD=1 "${OWN[@]}" rping -c -a "$IP" -p 7176 -C 1
  kill "$pid"; wait "$pid"
  check opt-out-started-no-uscmd test ! -e /tmp/uscmd-rxe0-1.sock
  # ... and by default the first starts the port's uscmd (/tmp/uscm/bin/uscmd, no uscm
  # exec, none by hand) and the second program goes through it
  "${OWN[@]}" rping -s -a "$IP" -p 7177 -v > /tmp/dropin-s3.log 2>&1 & pid=$!
  wait_for /tmp/dropin-s3.log 'listening on'
  check_output first-program-started-uscmd 'rxe0 port 1: started /tmp/uscm/bin/uscmd' \
    cat /tmp/dropin-s3.log
  check uscmd-socket-from-library test -S /tmp/uscmd-rxe0-1.sock
  check_output uscmd-log-from-library '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  "${OWN[@]}" rping -c -a "$IP" -p 7177 -v -C $N > /tmp/dropin-c3.log 2>&1
  rc=$?; if [ $rc = 0 ]; then pass second-program-via-started-uscmd; else
    sed 's/^/  | /' /tmp/dropin-c3.log | tail -n 30; fail second-program-via-started-uscmd "exit $rc"; fi
  check_pings dropin-client-via-uscmd-data /tmp/dropin-c3.log 'ping data: ' $N
  finish dropin-server-via-uscmd "$pid" /tmp/dropin-s3.log
  check_pings dropin-server-via-uscmd-data /tmp/dropin-s3.log 'server ping data: ' $N
  # 5.
  kernel_says=$(sync.sh get kernel-resolve-errors $T)
  dropin_says=$(resolve_errors env LD_LIBRARY_PATH="$LIB")
  if [ -n "$kernel_says" ] && [ "$dropin_says" = "$kernel_says" ]; then
    pass resolve-errors-as-kernel; printf '  = %s\n' $'\n'"$dropin_says"
  else
    diff <(echo "$kernel_says") <(echo "$dropin_says") | sed 's/^/  | /'
    fail resolve-errors-as-kernel "the drop-in's rping output differs from the kernel's (< kernel, > drop-in)"
  fi
  check_output resolve-silent-host-etimedout 'ADDR_ERROR, error -110' echo "$dropin_says"
  check_output resolve-no-route-enetunreach 'rdma_resolve_addr: Network is unreachable' \
    echo "$dropin_says"
  # the started uscmd was not the programs': neither their exit nor their signals
  # stopped it, it exited by its own idle timer (--idle-exit 30, counted from its last
  # client), having served both programs (and step 5's when it was still there)
  wait_for /tmp/uscmd-rxe0-1.log 'exiting \(--idle-exit\)'
  check_output started-uscmd-exited-by-itself 'no client for 30 s: exiting \(--idle-exit\)' \
    cat /tmp/uscmd-rxe0-1.log
  check_output uscmd-served-both 'clients ([2-9]|[1-9][0-9]+) accepted, 0 refused' \
    cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
