#!/usr/bin/env bash
# Two more programs that link librdmacm which issue 13 does not name, unmodified, on
# uscm's drop-in librdmacm.so.1 through `uscm exec` (VM b, no kernel CM) against the
# kernel CM (VM a), each way; each VM runs its server and, once the other VM's server
# listens, its client, so the two directions of a step overlap (docs/API.md "Other
# programs: fio and pyverbs"):
#   1. fio 3.33's rdma ioengine: the server is a `--rw=read` job with no hostname
#      (rdma_bind_addr 0.0.0.0, rdma_listen, one CONNECT_REQUEST, rdma_accept), the
#      client a `--rw=write` job with `--hostname` (rdma_resolve_addr / _route,
#      rdma_connect); `--verb=write` (the server's buffers in the first SEND, RDMA
#      WRITEs into them, a last SEND that ends the server's job) and `--verb=send` (SENDs
#      into the server's 64 posted receives), 64 x 4 KiB; each side disconnects and
#      destroys its ids without waiting for DISCONNECTED. fio's own race, on any CM:
#      its server accepts with rnr_retry_count 0 and posts its receives only after its
#      reply to the client's first SEND; the client sends its data 0.5 s after that
#      reply (engines/rdma.c usleep), so a server that took longer than that to post them
#      would fail the client with an RNR error (not seen in 5 runs at host load 5-7).
#   2. pyverbs (python3-pyverbs, rdma-core 44), tests/vm/pyverbs_cmid.py: synchronous
#      CMIDs from rdma_create_ep with their QPs, get_request / accept / connect, 10
#      messages of 1 KiB each way with post_send / post_recv, disconnect. The output of
#      the kernel's server (which served the drop-in's client) and the drop-in's server
#      (which served the kernel's client) are compared line for line, and the clients'
#      the same way, as 67-dropin-behaviour compares: QP attributes and completions too.
# Checked: exit status 0; fio's job line `err= 0`, its `issued rwts` (64 writes on the
# client; the server's receives for `send`), its group line `io=256KiB` where it moved
# data; pyverbs' outputs equal.
# Readiness: the kernel's listener in `rdma resource`, the drop-in's "listening on"
# (USCM_DEBUG=1), pyverbs' "server: listening"; the pyverbs client that received last
# disconnects only after the server's last SEND completed (sync.sh; docs/VM.md).
# targets: //api/librdmacm:librdmacm.so.1 //tools:uscmd //tools:uscm
. "$(dirname "$0")/../lib.sh"
vm_pair --cm-a --timeout 400
# shellcheck source=tests/vm/dropin.sh
. "$VM_DIR/dropin.sh"

IP=$USCM_VM_IP PEER=$USCM_VM_PEER_IP
FIO=(fio --ioengine=rdma --bs=4k --size=256k)
PY=(/usr/bin/python3 "$VM_DIR/pyverbs_cmid.py")
# fio_server PORT / fio_client VERB HOST PORT: the server's / the client's command in JOB
fio_server() { JOB=("${FIO[@]}" --name=srv --rw=read --iodepth=64 --port="$1"); }
fio_client() { JOB=("${FIO[@]}" --name=cli --rw=write --verb="$1" --hostname="$2" --port="$3"); }

# fio_ok NAME LOG SIDE VERB: fio's job ended without an error and moved what was asked
fio_ok() {
  has_lines "$1-err" "$2" '^(srv|cli): \(groupid=0, jobs=1\): err= 0: ' 1
  if [ "$3" = client ]; then
    has_lines "$1-issued" "$2" '^ +issued rwts: total=0,64,0,0 short=0,0,0,0 dropped=0,0,0,0$' 1
    has_lines "$1-io" "$2" '^ +WRITE: bw=.*, io=256KiB \(262kB\), run=' 1
  elif [ "$4" = send ]; then
    has_lines "$1-issued" "$2" '^ +issued rwts: total=64,0,0,0 short=0,0,0,0 dropped=0,0,0,0$' 1
    has_lines "$1-io" "$2" '^ +READ: bw=.*, io=256KiB \(262kB\), run=' 1
  fi
}

# Each VM runs its server and, once the other VM's server listens, its client at the same
# time: the two directions of a step overlap (VM a: the kernel CM, VM b: the drop-in).
dropin_roles
# listening NAME PORT LOG PID: this VM's server is ready (the kernel's listener in
# `rdma resource`; the drop-in's USCM_DEBUG line, as the drop-in's ids are not the kernel's)
listening() {
  if [ "$me" = kernel ]; then kernel_listening "$2"; else wait_for "$3" 'listening on' "$4"; fi &&
    sync.sh signal "$me-$1-ready"
}
# Ports: the server of VM a listens on P, VM b's on P + 1.
mine=$([ "$USCM_VM_ROLE" = a ] && echo 0 || echo 1) theirs=$([ "$USCM_VM_ROLE" = a ] && echo 1 || echo 0)

port=7470
for verb in write send; do
  fio_server $((port + mine))
  "${RUN[@]}" "${JOB[@]}" > /tmp/fio-s-$verb.log 2>&1 & pid=$!
  listening fio-$verb $((port + mine)) /tmp/fio-s-$verb.log "$pid"
  sync.sh wait "$peer-fio-$verb-ready" "$T"
  fio_client $verb "$PEER" $((port + theirs))
  run_to "$me-fio-$verb-to-$peer" /tmp/fio-c-$verb.log "${RUN[@]}" "${JOB[@]}"
  fio_ok "$me-fio-$verb-client" /tmp/fio-c-$verb.log client $verb
  finish "$me-fio-$verb-served-$peer" "$pid" /tmp/fio-s-$verb.log
  fio_ok "$me-fio-$verb-server" /tmp/fio-s-$verb.log server $verb
  port=$((port + 2))
done

# pyverbs: the side that received last (the client) disconnects once the server's last
# SEND completed
"${RUN[@]}" "${PY[@]}" server "$IP" $((7480 + mine)) \
  --before-disconnect "sync.sh signal py-$me-answered" \
  > /tmp/py-server.out 2> /tmp/py-server.err & pid=$!
wait_for /tmp/py-server.out '^server: listening$' "$pid" && sync.sh signal "py-$me-ready"
sync.sh wait "py-$peer-ready" "$T"
run_to "$me-pyverbs-to-$peer" /tmp/py-client.err "${RUN[@]}" \
  bash -c '"$@" > /tmp/py-client.out' _ "${PY[@]}" client "$PEER" $((7480 + theirs)) \
  --before-disconnect "sync.sh wait py-$peer-answered $T"
finish "$me-pyverbs-served-$peer" "$pid" /tmp/py-server.err

if [ "$USCM_VM_ROLE" = a ]; then
  sync.sh get py-dropin-server "$T" > /tmp/py-dropin-server.out
  sync.sh get py-dropin-client "$T" > /tmp/py-dropin-client.out
  same_outputs pyverbs-server-same /tmp/py-server.out /tmp/py-dropin-server.out
  same_outputs pyverbs-client-same /tmp/py-client.out /tmp/py-dropin-client.out
  echo "$FAILED" | sync.sh put a-failed
  sync.sh wait b-done "$T"
else
  sync.sh put py-dropin-server < /tmp/py-server.out
  sync.sh put py-dropin-client < /tmp/py-client.out
  check_output uscmd-started-on-demand '^uscmd: rxe0 port 1' cat /tmp/uscmd-rxe0-1.log
  check a-side-passed bash -c "[ \"\$(sync.sh get a-failed $T)\" = 0 ]"
  sync.sh signal b-done
fi
group_end
