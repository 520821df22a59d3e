#!/usr/bin/env bash
# The drop-in's paths for a user without privileges, and socket activation with
# systemd's own activator (issue 13), in one VM (rxe0 192.168.77.1 <-veth-> rxe1
# 192.168.77.2) with no ib_cm, rdma_cm, rdma_ucm (asserted). The library and uscmd come
# from tools/install.sh in /tmp/uscm (the build tree is under /root, mode 0700).
#   1. uscmd started by hand as root on both ports: its socket is mode 0666, owner root
#      (docs/ROUTER.md "The privilege boundary"). User nobody (setpriv --reuid=65534
#      --regid=65534 --clear-groups: no capabilities) may not open /dev/infiniband/umad0,
#      yet Debian's unmodified rping server (rxe0) and client (rxe1) pass as nobody
#      through the drop-in and uscmd (LD_LIBRARY_PATH alone); a rping server of nobody
#      on port 999 gets EACCES from rdma_bind_addr, as from the kernel's cma_get_port
#      (below 1024 needs CAP_NET_BIND_SERVICE; the library checks its own process at
#      bind, uscmd the peer's credentials at the listen's claim), and root's listens.
#   2. No uscmd: nobody's rping fails at once with the library's reason (USCM_DEBUG=1):
#      the uscmd it started could not open umad and the port cannot be opened directly
#      (no permission on umad), exit non-zero, no uscmd left running.
#   3. systemd-socket-activate --seqpacket -l /tmp/uscmd-rxeN-1.sock uscmd ... on both
#      ports, as systemd's uscmd.socket would (then chmod 0666: SocketMode=0666): no uscmd runs
#      until nobody's rping server connects; then uscmd runs on the passed socket
#      ("(socket activation)"), serves the server and the client (10 pings each), and
#      counts one client per port when stopped.
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 400
. "$VM_DIR/dropin.sh"

S=192.168.77.1 C=192.168.77.2 N=10
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
LIB=(env LD_LIBRARY_PATH=/tmp/uscm/lib/uscm USCM_DEBUG=1 timeout $T)

no_kernel_cm no-kernel-cm
check installed "$VM_DIR/../../tools/install.sh" --from="$USCM_VM_BIN" --prefix=/tmp/uscm

# rping_pair NAME PORT: nobody's rping server on rxe0 and client on rxe1, 10 pings each
rping_pair() {
  "${NOBODY[@]}" "${LIB[@]}" rping -s -a $S -p "$2" -v > /tmp/$1-s.log 2>&1 & local s=$!
  wait_for /tmp/$1-s.log 'listening on' $s
  run_to "$1-client" /tmp/$1-c.log "${NOBODY[@]}" "${LIB[@]}" rping -c -a $S -I $C -p "$2" -v -C $N
  finish_rping_server "$1-server" $s /tmp/$1-s.log
  check_pings "$1-client-data" /tmp/$1-c.log 'ping data: ' $N
  check_pings "$1-server-data" /tmp/$1-s.log 'server ping data: ' $N
}

# 1. uscmd as root, the programs as nobody
for dev in rxe0 rxe1; do
  /tmp/uscm/bin/uscmd --ca $dev --port 1 > /tmp/uscmd-$dev.log 2>&1 & eval "uscmd_$dev=\$!"
done
wait_for /tmp/uscmd-rxe0.log '^uscmd: rxe0 port 1' &&
  wait_for /tmp/uscmd-rxe1.log '^uscmd: rxe1 port 1'
check_output socket-mode-0666-owner-root '^666 root$' stat -c '%a %U' /tmp/uscmd-rxe0-1.sock
check_output nobody-cannot-open-umad 'umad0: Permission denied' \
  "${NOBODY[@]}" sh -c 'exec 3<> /dev/infiniband/umad0'
rping_pair nobody-rping 7410
check_output nobody-port-999-eacces '^rdma_bind_addr: Permission denied$' \
  "${NOBODY[@]}" "${LIB[@]}" rping -s -a $S -p 999
"${LIB[@]}" rping -s -a $S -p 999 > /tmp/root-999.log 2>&1 & pid=$!
check root-port-999-listens \
  wait_for /tmp/root-999.log 'listening on 192.168.77.1 port 999' $pid
stop_pid $pid
stop_pid "$uscmd_rxe0"; stop_pid "$uscmd_rxe1"

# 2. no uscmd: the reason, at once
check no-uscmd-running bash -c '! pgrep -x uscmd'
rc=0; "${NOBODY[@]}" "${LIB[@]}" rping -s -a $S -p 7411 > /tmp/no-uscmd.log 2>&1 || rc=$?
check nobody-without-uscmd-fails test "$rc" != 0
check_output nobody-without-uscmd-debug-uscmd-failed \
  'uscmd for rxe0 port 1 did not start: uscmd: cannot open the umad device of rxe0:1 .*'\
'Permission denied' \
  cat /tmp/no-uscmd.log
check_output nobody-without-uscmd-debug-no-permission \
  'rdma_bind_addr: device_open: cannot open the umad device of rxe0:1 .*\[EACCES\]$' \
  cat /tmp/no-uscmd.log
check_output nobody-without-uscmd-eacces '^rdma_bind_addr: Permission denied$' cat /tmp/no-uscmd.log
check no-uscmd-left bash -c '! pgrep -x uscmd'

# 3. systemd's own activator, as uscmd.socket
rm -f /tmp/uscmd-rxe0-1.sock /tmp/uscmd-rxe1-1.sock
for dev in rxe0 rxe1; do
  systemd-socket-activate --seqpacket -l /tmp/uscmd-$dev-1.sock \
    /tmp/uscm/bin/uscmd --ca $dev --port 1 > /tmp/activate-$dev.log 2>&1 &
  eval "act_$dev=\$!"
  wait_for /tmp/activate-$dev.log "^Listening on /tmp/uscmd-$dev-1.sock as 3" $!
  # the activator makes the file 0644 whatever the umask and has no mode option:
  # uscmd.socket's SocketMode=0666 by hand (0644 refuses nobody's connect: EACCES)
  chmod 0666 /tmp/uscmd-$dev-1.sock
done
check_output activated-socket-mode '^666 root$' stat -c '%a %U' /tmp/uscmd-rxe0-1.sock
check no-uscmd-before-the-first-connection bash -c '! pgrep -x uscmd'
rping_pair activated-rping 7412
for dev in rxe0 rxe1; do
  check_output activated-uscmd-$dev "^uscmd: $dev port 1 .*\\(socket activation\\)\$" \
    cat /tmp/activate-$dev.log
done
stop_pid "$act_rxe0"; stop_pid "$act_rxe1"
for dev in rxe0 rxe1; do
  check_output activated-$dev-served-one 'clients 1 accepted, 0 refused' cat /tmp/activate-$dev.log
done
group_end
