#!/usr/bin/env bash
# Two of Debian's unmodified rping servers as two processes on one port number of one
# RDMA port, on two addresses of its netdev, through `uscm exec`, no uscmd started by
# hand (issue 13, "Several programs on one host"): one VM, rxe0's veth0 has
# 192.168.77.1 and a second address 192.168.77.101 (/32, no route change). The kernel's
# rdma_cm lets both listen (cma_check_port: different addresses); uscmd does the same
# from the address each claim carries, and hands each client's REQ to the server of the
# destination in its rdma_cm IP header. Both clients (on rxe1) run at once.
# Checked: both servers listen; a third server on the first address and port is
# refused at rdma_bind_addr with EADDRINUSE, and a wildcard server on that port with
# EADDRNOTAVAIL, as on the kernel CM (uscmd holds a claim from the bind on, as the
# kernel's cma_get_port; the wildcard's refusal on rxe0 undoes its bind on rxe1 too);
# rping prints perror("rdma_bind_addr") in bind_server, so the kernel's -EADDRINUSE
# from cma_check_port reads "rdma_bind_addr: Address already in use" and its
# -EADDRNOTAVAIL "rdma_bind_addr: Cannot assign requested address"; both
# clients and both servers exit 0 with rping's 10 data lines byte for byte on every end
# (a REQ handed to the wrong server would leave the other waiting until its timeout).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_boot --timeout 300
. "$VM_DIR/dropin.sh"

S1=192.168.77.1 S2=192.168.77.101 C=192.168.77.2 P=7200 N=10

# S2 on veth0, and until rxe0 has its RoCE v2 GID (::ffff:c0a8:4d65, IPv4-mapped)
second_address() {
  ip addr add "$S2/32" dev veth0 || return 1
  local end=$((SECONDS + T))
  while ((SECONDS < end)); do
    grep -qs 'ffff:c0a8:4d65' /sys/class/infiniband/rxe0/ports/1/gids/* && return 0
    sleep 0.1
  done
  return 1
}
# refused_at_bind ADDRESS MESSAGE LOG: a third rping server on ADDRESS and the same
# port fails at rdma_bind_addr with MESSAGE (the kernel refuses there too)
refused_at_bind() {
  ! "${USCM[@]}" rping -s -a "$1" -p $P > "$3" 2>&1 && grep -q "rdma_bind_addr: $2" "$3"
}

no_kernel_cm no-kernel-cm
check second-address second_address
"${USCM[@]}" rping -s -a $S1 -p $P -v > /tmp/rping-s1.log 2>&1 & s1=$!
check server-on-first-address wait_for /tmp/rping-s1.log "listening on $S1 port $P" $s1
"${USCM[@]}" rping -s -a $S2 -p $P -v > /tmp/rping-s2.log 2>&1 & s2=$!
check server-on-second-address wait_for /tmp/rping-s2.log "listening on $S2 port $P" $s2
check same-address-and-port-refused-at-bind \
  refused_at_bind $S1 'Address already in use' /tmp/rping-third.log
check wildcard-refused-at-bind \
  refused_at_bind 0.0.0.0 'Cannot assign requested address' /tmp/rping-wildcard.log
grep -h rdma_bind_addr /tmp/rping-third.log /tmp/rping-wildcard.log | sed 's/^/  | /'
"${USCM[@]}" rping -c -a $S1 -I $C -p $P -v -C $N > /tmp/rping-c1.log 2>&1 & c1=$!
"${USCM[@]}" rping -c -a $S2 -I $C -p $P -v -C $N > /tmp/rping-c2.log 2>&1 & c2=$!
finish client-to-first-address $c1 /tmp/rping-c1.log
finish client-to-second-address $c2 /tmp/rping-c2.log
finish_rping_server server-on-first-address-exit $s1 /tmp/rping-s1.log
finish_rping_server server-on-second-address-exit $s2 /tmp/rping-s2.log
for i in 1 2; do
  check_pings client-$i-data /tmp/rping-c$i.log 'ping data: ' $N
  check_pings server-$i-data /tmp/rping-s$i.log 'server ping data: ' $N
done
group_end
