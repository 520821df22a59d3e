#!/usr/bin/env bash
# DAPL (uDAPL 2.1.10, Debian 12's dapl2-utils; libdapl2's ofa-v2-cma-roe provider,
# libdaplofa.so.2, links librdmacm) on uscm's drop-in librdmacm.so.1 through `uscm exec`
# (VM b, no kernel CM) against the kernel CM (VM a), both roles (docs/API.md "Other
# programs: DAPL"):
#   1. `dtestcm -s -c 10` on the kernel CM <- `dtestcm -h PEER -c 10` on the drop-in;
#   2. the server on the drop-in <- the client on the kernel CM. DAPL's accept moves the
#      EP's QP to the request's id by assigning id->qp (AdoptAssignedQp in
#      api/librdmacm/connection_calls.cc); before, the kernel rejected the drop-in's
#      2nd REP as a stale connection (QPN 0 in each) and its client dumped core.
# dtestcm opens the interface adapter named in dat.conf (DAT_OVERRIDE: one line naming
# this VM's netdev), creates a PSP (rdma_listen on port 45248) and times 10 RC
# connections: dat_ep_connect / dat_cr_accept with private data, ESTABLISHED, then
# dat_ep_disconnect. The client learns the server's address over a TCP socket (port
# 15828) that the server opens after its PSP: that is the readiness line here.
# Checked: exit 0 and "ALL 10 CONNECTED on Client!" / "on Server!".
# Not here: dtest (RDMA WRITE and READ between the two) fails kernel <-> kernel on rxe
# (its first RDMA WRITE completes flushed; docs/API.md).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400
# shellcheck source=tests/vm/dropin.sh
. "$VM_DIR/dropin.sh"

nic=$(ip -o -4 addr show | awk -v ip="$USCM_VM_IP" '$4 ~ "^"ip"/" {print $2}')
P=ofa-v2-cma-roe-$nic
echo "$P u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"$nic 0\" \"\"" > /tmp/dat.conf
export DAT_OVERRIDE=/tmp/dat.conf
CONNS=10

dropin_roles

# tcp_listening PID: until dtestcm's server (PID) listens on its TCP port 15828
tcp_listening() {
  local end=$((SECONDS + T))
  until ss -Hltn 'sport = :15828' | grep -q .; do
    kill -0 "$1" 2>/dev/null || { echo "the server exited before it listened" >&2; return 1; }
    ((SECONDS < end)) || { echo "no listener on 15828 after ${T}s" >&2; return 1; }
    sleep 0.1
  done
}

# serve STEP: this VM's server, for the peer's client
serve() {
  "${RUN[@]}" dtestcm -P "$P" -s -c $CONNS > /tmp/dtestcm-s.log 2>&1 & local pid=$!
  tcp_listening "$pid" && sync.sh signal "$me-server-$1-ready"
  finish "$me-server-from-$peer" "$pid" /tmp/dtestcm-s.log
  has_lines "$me-server-connected" /tmp/dtestcm-s.log "^ ALL $CONNS CONNECTED on Server!$" 1
}

# connect STEP: this VM's client, to the peer's server
connect() {
  sync.sh wait "$peer-server-$1-ready" "$T"
  run_to "$me-client-to-$peer" /tmp/dtestcm-c.log "${RUN[@]}" dtestcm -P "$P" -h "$PEER" -c $CONNS
  has_lines "$me-client-connected" /tmp/dtestcm-c.log "^ ALL $CONNS CONNECTED on Client!$" 1
  has_lines "$me-client-connections" /tmp/dtestcm-c.log "^ Connections: .*Num=$CONNS$" 1
}

PEER=$USCM_VM_PEER_IP
# 1. the kernel's server <- the drop-in's client; 2. the reverse
if [ "$me" = kernel ]; then serve 1; connect 2; else connect 1; serve 2; fi

if [ "$USCM_VM_ROLE" = a ]; then
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done "$T"
else
  check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
