#!/usr/bin/python3
"""tests/vm/pyverbs_cmid.py - Debian's unmodified pyverbs (python3-pyverbs, rdma-core 44)
over librdmacm, the way rdma-core's own tests use pyverbs.cmid.CMID (tests/base_rdmacm.py
SyncCMResources, tests/rdmacm_utils.py CMSyncConnection): rdma_getaddrinfo through
AddrInfo, a synchronous CMID from rdma_create_ep with its QP, get_request / accept /
connect, post_recv / post_send with an MR from reg_msgs, disconnect, close.

  pyverbs_cmid.py server ADDR PORT [--before-disconnect CMD]
  pyverbs_cmid.py client ADDR PORT [--before-disconnect CMD]

The client sends N messages of SIZE bytes ('c' * SIZE after the message's number and its
AV's flow label); the server checks each, says whether the client's flow label is its own
AV's (both come from the client's path), and answers with 's' * SIZE after the same
number and label, which the client checks. CMD (run by the shell after the last message,
before disconnect) lets the group hold the side that received last until the other
side's last SEND has completed: rxe may lose the ACK of the last SEND when its receiver
disconnects at once (docs/VM.md "Writing a group").

The output is only what must be the same on the kernel's rdma_cm and on uscm's drop-in
librdmacm (no address, QPN, PSN or key), so a group compares it line for line. Exit
status 0 when every step and check passed, 1 at the first failure (its line says why).
"""
import subprocess
import sys
import time

from pyverbs.cmid import AddrInfo, CMID, ConnParam
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QPCap, QPInitAttr
import pyverbs.cm_enums as ce
import pyverbs.enums as e

N, SIZE = 10, 1024

# the QP attributes a connection's two CMs set (ibv_query_qp); names as in ibv_qp_attr
QP_FIELDS = ('qp_state', 'path_mtu', 'qp_access_flags', 'max_rd_atomic', 'max_dest_rd_atomic',
             'min_rnr_timer', 'timeout', 'retry_cnt', 'rnr_retry', 'port_num', 'pkey_index')
AH_FIELDS = ('sl', 'static_rate', 'port_num', 'is_global')
# the flow label comes from the active side's random source port (the kernel's
# cma_get_roce_udp_flow_label): printed as "set", and the client sends its own in its
# messages so that the server can say whether its AV has the same
GRH_FIELDS = ('sgid_index', 'hop_limit', 'traffic_class')


START = time.monotonic()


def say(text):
    # stdout is compared between the CMs; stderr has when (for a slow step in the log)
    print(text, flush=True)
    print(f'[{time.monotonic() - START:7.3f} s] {text}', file=sys.stderr, flush=True)


def show_qp(role, cmid):
    attr, init = cmid.query_qp(e.IBV_QP_STATE | e.IBV_QP_PATH_MTU | e.IBV_QP_ACCESS_FLAGS |
                               e.IBV_QP_MAX_QP_RD_ATOMIC | e.IBV_QP_MAX_DEST_RD_ATOMIC |
                               e.IBV_QP_MIN_RNR_TIMER | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                               e.IBV_QP_RNR_RETRY | e.IBV_QP_PORT | e.IBV_QP_PKEY_INDEX |
                               e.IBV_QP_AV | e.IBV_QP_CAP)
    say(f'{role}: qp ' + ' '.join(f'{f} {getattr(attr, f)}' for f in QP_FIELDS))
    ah = attr.ah_attr
    say(f'{role}: qp ah ' + ' '.join(f'{f} {getattr(ah, f)}' for f in AH_FIELDS) + ' ' +
        ' '.join(f'{f} {getattr(ah, f)}' for f in GRH_FIELDS) +
        f' flow_label set {ah.flow_label != 0}')
    say(f'{role}: qp cap max_send_wr {attr.cap.max_send_wr} max_recv_wr {attr.cap.max_recv_wr} '
        f'max_send_sge {attr.cap.max_send_sge} max_recv_sge {attr.cap.max_recv_sge} '
        f'sq_sig_all {init.sq_sig_all}')
    return ah.flow_label


def message(char, k, flow_label):
    head = f'{k:03d} {flow_label:07d} '.encode()
    return head + char.encode() * (SIZE - len(head))


def check_wc(role, what, wc, k):
    if wc is None or wc.status != e.IBV_WC_SUCCESS:
        raise PyverbsError(f'{what} {k}: completion {wc and wc.status}')
    return f'{role}: {what} {k}: opcode {wc.opcode} status {wc.status} byte_len {wc.byte_len}'


def qp_init_attr():
    # as SyncCMResources: RC, one receive posted at a time; every send signalled
    return QPInitAttr(qp_type=e.IBV_QPT_RC, cap=QPCap(max_send_wr=1, max_recv_wr=1))


def server(addr, port, before_disconnect):
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
    listen_id = CMID(creator=ai, qp_init_attr=qp_init_attr())
    listen_id.listen()
    say('server: listening')
    cmid = listen_id.get_request()
    say(f'server: request on {cmid.dev_name} port {cmid.port_num}, qp created: '
        f'{cmid.qpn is not None}')
    mr = cmid.reg_msgs(SIZE)
    cmid.post_recv(mr)   # the first message may come as soon as the REP is out
    cmid.accept(ConnParam())
    say('server: accepted')
    flow_label = show_qp('server', cmid)
    for k in range(N):
        wc = cmid.get_recv_comp()
        say(check_wc('server', 'recv', wc, k))
        got = mr.read(SIZE, 0)
        if k == 0:
            say(f'server: the client\'s flow label is this AV\'s: {got[4:11] == b"%07d" % flow_label}')
            client_label = int(got[4:11])
        if got != message('c', k, client_label):
            raise PyverbsError(f'message {k}: {got[:16]!r}... is not the client\'s')
        if k + 1 < N:
            cmid.post_recv(mr)   # before the answer: the next message may follow it at once
        mr.write(message('s', k, client_label), SIZE)
        cmid.post_send(mr)
        say(check_wc('server', 'send', cmid.get_send_comp(), k))
    say(f'server: {N} messages of {SIZE} bytes checked and answered')
    hold(before_disconnect)
    cmid.disconnect()
    say('server: disconnected')
    cmid.close()
    listen_id.close()


def client(addr, port, before_disconnect):
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cmid = CMID(creator=ai, qp_init_attr=qp_init_attr())
    say(f'client: endpoint on {cmid.dev_name} port {cmid.port_num}, qp created: '
        f'{cmid.qpn is not None}')
    mr = cmid.reg_msgs(SIZE)
    cmid.connect(ConnParam())
    say('client: connected')
    flow_label = show_qp('client', cmid)
    for k in range(N):
        cmid.post_recv(mr)
        mr.write(message('c', k, flow_label), SIZE)
        cmid.post_send(mr)
        say(check_wc('client', 'send', cmid.get_send_comp(), k))
        wc = cmid.get_recv_comp()
        say(check_wc('client', 'recv', wc, k))
        got = mr.read(SIZE, 0)
        if got != message('s', k, flow_label):
            raise PyverbsError(f'answer {k}: {got[:16]!r}... is not the server\'s')
    say(f'client: {N} answers of {SIZE} bytes checked')
    hold(before_disconnect)
    cmid.disconnect()
    say('client: disconnected')
    cmid.close()


def hold(command):
    if command and subprocess.call(command, shell=True) != 0:
        raise PyverbsError(f'--before-disconnect {command!r} failed')


def main(argv):
    if len(argv) not in (4, 6) or argv[1] not in ('server', 'client') or (
            len(argv) == 6 and argv[4] != '--before-disconnect'):
        sys.stderr.write(__doc__)
        return 2
    role, addr, port = argv[1:4]
    before = argv[5] if len(argv) == 6 else None
    try:
        (server if role == 'server' else client)(addr, port, before)
    except PyverbsError as err:   # PyverbsRDMAError (errno) included
        say(f'{role}: FAILED: {err}')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
