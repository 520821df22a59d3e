#!/usr/bin/env bash
# Two linked VMs (pair.sh): each has one rxe0 on its only NIC; RC data crosses the link.
. "$(dirname "$0")/../lib.sh"
vm_pair

check "pair-rxe0-active-$USCM_VM_ROLE" grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state
if [ "$USCM_VM_ROLE" = a ]; then
  ibv_rc_pingpong -d rxe0 -g 1 -n 20 > /tmp/server.log 2>&1 & server=$!
  sync.sh signal listening
  if wait "$server"; then pass pair-rc-pingpong-server; else
    sed 's/^/  | /' /tmp/server.log; fail pair-rc-pingpong-server "ibv_rc_pingpong -d rxe0 failed"; fi
  sync.sh wait client-done 60
else
  sync.sh wait listening 60
  # the server's TCP socket may open a moment after the signal: retry the connect
  check pair-rc-pingpong-client bash -c 'for i in $(seq 150); do
    ibv_rc_pingpong -d rxe0 -g 1 -n 20 "$USCM_VM_PEER_IP" && exit 0; sleep 0.2; done; exit 1'
  sync.sh signal client-done
fi
group_end
