#!/usr/bin/env bash
# librpma (PMDK's remote persistent memory access library, Debian 12's librpma0 1.2.0),
# which issue 13 does not name, unmodified, on uscm's drop-in librdmacm.so.1 through
# `uscm exec` (VM b, no kernel CM) against the kernel CM (VM a), each way. Our own
# server and client (tests/vm/rpma, -lrpma, no uscm header) drive librdmacm the way
# librpma does: the client's id made in synchronous mode (rdma_create_id with no
# channel, blocking rdma_resolve_addr / _route) and migrated to a channel of its own
# before rdma_connect; each incoming request migrated to a channel of its own after
# rdma_accept; rdma_create_qp_ex with librpma's CQs; private data in the connect and the
# accept; the channel fds polled; rdma_getaddrinfo with RAI_PASSIVE (docs/API.md "Other
# programs: librpma").
#   1. one client: each VM's server (N=1) <- the other VM's client: the client reads the
#      server's 4 KiB pattern (rpma_read), writes its own (rpma_write + rpma_flush),
#      reads it back, sends a message and checks the answer; the server checks the
#      message and that its buffer holds the client's pattern.
#   2. three clients at once to one server: the server accepts all before serving any,
#      each connection on its own migrated channel; the third reads the server's pattern
#      and deletes its connection without disconnecting (rdma_destroy_id of an
#      established id: the server's RPMA_CONN_CLOSED must come from its DREQ).
#   3. two clients as in 2 with an SRQ on the server (rpma_srq: rdma_create_qp_ex with its srq, the
#      messages' receives on the SRQ's own CQ, matched to connections by QP number),
#      clients whose QPs have a receive CQ of their own (both CQs on one completion
#      channel), and a third client at the same time that the server rejects
#      (rpma_conn_req_delete: rdma_reject; the client's RPMA_CONN_REJECTED).
# Each server first calls rpma_ep_next_conn_req on its fd made non-blocking before any
# client comes, and rpma_conn_next_event on each accepted connection's the same way,
# as example 06 sets O_NONBLOCK on what it epolls (librdmacm's EAGAIN, librpma's
# "Provider error" on both CMs), and prints what it got.
# Checked: exit status 0 of every server and client; the kernel's server (which served
# the drop-in's clients) and the drop-in's server (which served the kernel's) print the
# same lines, and the clients the same way (the two-client step's lines sorted: the
# clients' order is the race's).
# Readiness: the server's own "server: listening" line (printed when rpma_ep_listen, i.e.
# rdma_listen, returned).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm //tests/vm/rpma:rpma_server //tests/vm/rpma:rpma_client
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400
# shellcheck source=tests/vm/dropin.sh
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
SERVER=$USCM_VM_BIN/tests/vm/rpma/rpma_server CLIENT=$USCM_VM_BIN/tests/vm/rpma/rpma_client

dropin_roles
# Ports: the server of VM a listens on P, VM b's on P + 1.
mine=$([ "$USCM_VM_ROLE" = a ] && echo 0 || echo 1) theirs=$([ "$USCM_VM_ROLE" = a ] && echo 1 || echo 0)

# step NAME PORT SRQ RCQ TAG...: this VM's server (with SRQ "srq": an SRQ) on PORT + mine
# for as many requests as TAGs (it rejects those that start with "reject"); once the other VM's
# server listens, this VM's clients (one per TAG, at once; RCQ "rcq": each with a
# receive CQ of its own) to it. Step one's client finds its device from the server's
# address (rpma_utils_get_ibv_context REMOTE, as librpma's examples), the others from IP.
step() {
  local name=$1 port=$2 srq=$3 rcq=$4 pid tag cpids=() rc dev=$IP; shift 4
  [ "$name" = one ] && dev=remote
  # shellcheck disable=SC2086  # $srq / $rcq: no word, or one
  "${RUN[@]}" "$SERVER" "$IP" $((port + mine)) $# ${srq%-} \
    > /tmp/"$name"-server.out 2> /tmp/"$name"-server.err & pid=$!
  wait_for /tmp/"$name"-server.out '^server: listening' "$pid" && sync.sh signal "$me-$name-ready"
  sync.sh wait "$peer-$name-ready" "$T"
  for tag in "$@"; do
    # shellcheck disable=SC2086
    "${RUN[@]}" "$CLIENT" "$dev" "$PEER" $((port + theirs)) "$tag" ${rcq%-} \
      > /tmp/"$name"-client-"$tag".out 2> /tmp/"$name"-client-"$tag".err &
    cpids+=($!)
  done
  for tag in "$@"; do
    rc=0; wait "${cpids[0]}" || rc=$?; cpids=("${cpids[@]:1}")
    if [ "$rc" = 0 ]; then pass "$me-rpma-$name-client-$tag-to-$peer"; else
      cat /tmp/"$name"-client-"$tag".out >> /tmp/"$name"-client-"$tag".err
      show /tmp/"$name"-client-"$tag".err; fail "$me-rpma-$name-client-$tag-to-$peer" "exit $rc"
    fi
  done
  cat /tmp/"$name"-server.out >> /tmp/"$name"-server.err
  finish "$me-rpma-$name-server-served-$peer" "$pid" /tmp/"$name"-server.err
  # the outputs to compare: the server's sorted, the clients' in tag order
  sort /tmp/"$name"-server.out > /tmp/"$name"-server.sorted
  for tag in "$@"; do cat /tmp/"$name"-client-"$tag".out; done > /tmp/"$name"-clients.out
}

step one 7490 - - one
step two 7492 - - two-a two-b drop-c
step three 7494 srq rcq three-a three-b reject-c
STEPS=(one two three)

if [ "$USCM_VM_ROLE" = a ]; then
  for name in "${STEPS[@]}"; do
    sed 's/^/  = /' /tmp/"$name"-server.sorted /tmp/"$name"-clients.out
    sync.sh get "rpma-dropin-$name-server" "$T" > /tmp/"$name"-dropin-server.sorted
    sync.sh get "rpma-dropin-$name-clients" "$T" > /tmp/"$name"-dropin-clients.out
    same_outputs "rpma-$name-server-same" /tmp/"$name"-server.sorted /tmp/"$name"-dropin-server.sorted
    same_outputs "rpma-$name-clients-same" /tmp/"$name"-clients.out /tmp/"$name"-dropin-clients.out
  done
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done "$T"
else
  for name in "${STEPS[@]}"; do
    sync.sh put "rpma-dropin-$name-server" < /tmp/"$name"-server.sorted
    sync.sh put "rpma-dropin-$name-clients" < /tmp/"$name"-clients.out
  done
  check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
