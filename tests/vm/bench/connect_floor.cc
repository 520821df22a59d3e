// The floor under cmtime's connect step (docs/API.md "cmtime"): the work every CM, the
// kernel's or a user-space one, must do per connection, with no CM at all. Runs in the VM
// (rxe0 <-> rxe1, docs/VM.md); a bench, not a test. Per connection:
//  (a) the QP modifies librdmacm makes in the connect step (rdma-core librdmacm/cma.c):
//      the server's rdma_accept and the client's ucma_process_conn_resp each call
//      ucma_modify_qp_rtr (INIT->INIT with the CM's attributes, then INIT->RTR) and
//      ucma_modify_qp_rts (RTR->RTS): 3 ibv_modify_qp per end, 6 per connection, on RC
//      QPs created beforehand and moved to INIT as rdma_create_qp does (cmtime's own
//      "create qp" step, not timed here);
//  (b) the three CM MADs, REQ (client -> server), REP (back) and RTU (again), each a
//      256-byte umad_send on one port and the umad_recv of it on the other port's QP1.
//      Class 0x09 (a vendor class nobody registers), so that the kernel's ib_cm, loaded
//      or not, does not matter; ib_mad handles every GSI class the same way.
// (b) runs twice: one connection at a time, and `window` connections' MADs in flight.
// Prints, for each part: wall ms, this process's CPU ms (getrusage) and the whole VM's
// busy CPU ms (/proc/stat: every CPU, every process, kernel threads and softirqs
// included), in total and per connection.
//   connect_floor [--n N] [--server rxe0] [--client rxe1] [--window 32] [--mad-class 0x09]
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/vm/bench/floor_clocks.h"

namespace {

constexpr int kPort = 1;
constexpr int kMadSize = 256;
constexpr uint32_t kQp1Qkey = 0x80010000;
constexpr uint8_t kMethodSend = 0x03;
// The masks the kernel's rdma_init_qp_attr returns for a RoCE RC QP, state by state.
constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

[[noreturn]] void Die(const std::string& what) {
  fprintf(stderr, "connect_floor: %s: %s\n", what.c_str(), strerror(errno));
  exit(1);
}

using uscm::floor_bench::Clocks;
using uscm::floor_bench::Now;

void Report(const char* part, const Clocks& a, const Clocks& b, int n) {
  const double wall = b.wall_ms - a.wall_ms, self = b.self_cpu_ms - a.self_cpu_ms,
               vm = b.vm_busy_ms - a.vm_busy_ms;
  printf("%-6s N=%d  wall %8.1f ms (%.3f ms/conn)  process CPU %8.1f ms (%.3f ms/conn)  "
         "VM busy %8.1f ms (%.3f ms/conn)\n",
         part, n, wall, wall / n, self, self / n, vm, vm / n);
}

// One end: a device, its RoCE v2 IPv4 GID, and its N RC QPs.
struct End {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  int gid_index = -1;
  ibv_gid gid{};
  std::vector<ibv_qp*> qps;
};

End OpenEnd(const std::string& name, int n) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list) Die("ibv_get_device_list");
  End e;
  for (int i = 0; i < count; ++i)
    if (name == ibv_get_device_name(list[i])) e.ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (!e.ctx) Die("no device " + name);
  // The GID librdmacm binds to for an IPv4 address: RoCE v2, ::ffff:a.b.c.d.
  for (int i = 0; i < 16 && e.gid_index < 0; ++i) {
    ibv_gid_entry entry;
    if (ibv_query_gid_ex(e.ctx, kPort, i, &entry, 0) != 0) continue;
    const uint8_t* raw = entry.gid.raw;
    const bool v4 = raw[10] == 0xff && raw[11] == 0xff &&
                    std::all_of(raw, raw + 10, [](uint8_t b) { return b == 0; });
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && v4) {
      e.gid_index = i;
      memcpy(e.gid.raw, raw, 16);
    }
  }
  if (e.gid_index < 0) Die(name + ": no RoCE v2 IPv4 GID in the first 16 entries");
  e.pd = ibv_alloc_pd(e.ctx);
  e.cq = ibv_create_cq(e.ctx, 2 * n + 2, nullptr, nullptr, 0);
  if (!e.pd || !e.cq) Die(name + ": PD / CQ");
  for (int i = 0; i < n; ++i) {
    ibv_qp_init_attr init{};  // cmtime's init_qp_attr: one WR, one SGE each way
    init.send_cq = init.recv_cq = e.cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(e.pd, &init);
    if (!qp) Die(name + ": ibv_create_qp #" + std::to_string(i));
    ibv_qp_attr a{};  // rdma_create_qp's ucma_init_conn_qp: RESET -> INIT
    a.qp_state = IBV_QPS_INIT;
    a.port_num = kPort;
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp, &a, kInitMask) != 0) Die(name + ": RESET -> INIT");
    e.qps.push_back(qp);
  }
  return e;
}

// What ucma_modify_qp_rtr and ucma_modify_qp_rts make: the attributes and masks the
// kernel's rdma_init_qp_attr returns for a RoCE RC QP (ib_cm's cm_init_qp_*_attr), each
// state's attributes fetched with a write() to rdma_ucm first (CM work, not timed here).
void ConnectQp(ibv_qp* qp, const End& self, const End& peer, uint32_t peer_qpn,
               uint32_t psn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = kPort;
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, kInitMask) != 0) Die("INIT -> INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(self.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = kPort;
  if (ibv_modify_qp(qp, &a, kRtrMask) != 0) Die("INIT -> RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, kRtsMask) != 0) Die("RTR -> RTS");
}

// A port's QP1 through ib_umad, registered for the SEND method of one class.
struct MadPort {
  int fd = -1, agent = -1;
  std::vector<uint8_t> buf;
};

MadPort OpenMadPort(const std::string& ca, int mgmt_class) {
  MadPort p;
  p.fd = umad_open_port(const_cast<char*>(ca.c_str()), kPort);
  if (p.fd < 0) Die("umad_open_port " + ca);
  long mask[16 / sizeof(long)] = {};
  mask[kMethodSend / (8 * sizeof(long))] |= 1L << (kMethodSend % (8 * sizeof(long)));
  p.agent = umad_register(p.fd, mgmt_class, 1, 0, mask);
  if (p.agent < 0) Die("umad_register class " + std::to_string(mgmt_class) + " on " + ca);
  p.buf.assign(umad_size() + kMadSize, 0);
  return p;
}

// `from` sends one 256-byte MAD of TID `tid` to `to`'s QP1.
void MadSend(MadPort& from, const End& from_end, const End& to_end, int mgmt_class,
             uint64_t tid) {
  void* umad = from.buf.data();
  memset(umad, 0, from.buf.size());
  umad_set_addr(umad, 0, 1, 0, static_cast<int>(kQp1Qkey));
  ib_mad_addr_t grh{};
  memcpy(grh.gid, to_end.gid.raw, 16);
  grh.hop_limit = 64;
  umad_set_grh(umad, &grh);
  umad_get_mad_addr(umad)->gid_index = static_cast<uint8_t>(from_end.gid_index);  // not copied
  auto* mad = static_cast<uint8_t*>(umad_get_mad(umad));
  mad[0] = 1;  // base version
  mad[1] = static_cast<uint8_t>(mgmt_class);
  mad[2] = 1;  // class version
  mad[3] = kMethodSend;
  const uint64_t be_tid = htobe64(tid);
  memcpy(mad + 8, &be_tid, 8);
  if (umad_send(from.fd, from.agent, umad, kMadSize, 0, 0) != 0) Die("umad_send");
}

// `to` receives one MAD (5 s bound); its TID's low 32 bits must lie in [first,
// first + count).
uint64_t MadRecv(MadPort& to, uint64_t first, uint64_t count) {
  int length = kMadSize;
  if (umad_recv(to.fd, to.buf.data(), &length, 5000) < 0) Die("umad_recv (5 s bound)");
  uint64_t got;
  memcpy(&got, static_cast<uint8_t*>(umad_get_mad(to.buf.data())) + 8, 8);
  got = be64toh(got) & 0xffffffffu;  // ib_umad puts its agent's id in the high 32 bits
  if (got < first || got >= first + count || length != kMadSize) {
    errno = EPROTO;
    Die("received MAD: TID " + std::to_string(got) + " length " + std::to_string(length) +
        ", expected a TID in [" + std::to_string(first) + ", " +
        std::to_string(first + count) + ")");
  }
  return got;
}

// The three MADs of `window` connections at a time: every REQ sent, then received, then
// every REP, then every RTU. window 1 is one connection after the other (each receive
// waits for its MAD); a larger one is closer to cmtime's all-in-flight steps.
void MadConnections(MadPort& server_mad, const End& server, MadPort& client_mad,
                    const End& client, int mgmt_class, int n, int window) {
  for (int base = 0; base < n; base += window) {
    const int w = std::min(window, n - base);
    for (int hop = 0; hop < 3; ++hop) {  // REQ, REP, RTU
      const bool from_client = hop != 1;
      MadPort& from = from_client ? client_mad : server_mad;
      MadPort& to = from_client ? server_mad : client_mad;
      const uint64_t first = 3ull * n * hop + static_cast<uint64_t>(base);
      for (int i = 0; i < w; ++i)
        MadSend(from, from_client ? client : server, from_client ? server : client, mgmt_class,
                first + i);
      std::vector<bool> seen(w);
      for (int i = 0; i < w; ++i) {
        const uint64_t tid = MadRecv(to, first, w);
        if (seen[tid - first]) {
          errno = EPROTO;
          Die("TID " + std::to_string(tid) + " received twice");
        }
        seen[tid - first] = true;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000, mgmt_class = 0x09, window = 32;
  std::string server_ca = "rxe0", client_ca = "rxe1";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--n") n = atoi(v.c_str());
    else if (k == "--server") server_ca = v;
    else if (k == "--client") client_ca = v;
    else if (k == "--window") window = atoi(v.c_str());
    else if (k == "--mad-class") mgmt_class = static_cast<int>(strtol(v.c_str(), nullptr, 0));
    else {
      fprintf(stderr, "usage: connect_floor [--n N] [--server CA] [--client CA] "
                      "[--window W] [--mad-class C]\n");
      return 2;
    }
  }
  if (n <= 0 || window <= 0 || mgmt_class <= 0 || mgmt_class > 0xff) {
    fprintf(stderr, "connect_floor: bad --n, --window or --mad-class\n");
    return 2;
  }
  if (umad_init() < 0) Die("umad_init");
  End server = OpenEnd(server_ca, n), client = OpenEnd(client_ca, n);
  MadPort server_mad = OpenMadPort(server_ca, mgmt_class),
          client_mad = OpenMadPort(client_ca, mgmt_class);
  printf("connect_floor: server %s (GID index %d), client %s (GID index %d), %d RC QP "
         "pairs in INIT, MAD class 0x%02x\n",
         server_ca.c_str(), server.gid_index, client_ca.c_str(), client.gid_index, n,
         mgmt_class);

  // (a) the server's modifies at rdma_accept, then the client's on the REP
  Clocks t0 = Now();
  for (int i = 0; i < n; ++i) {
    ConnectQp(server.qps[i], server, client, client.qps[i]->qp_num, 1000 + i);
    ConnectQp(client.qps[i], client, server, server.qps[i]->qp_num, 1000 + i);
  }
  Clocks t1 = Now();
  // (b) REQ, REP, RTU: one connection at a time, then `window` at a time
  MadConnections(server_mad, server, client_mad, client, mgmt_class, n, 1);
  Clocks t2 = Now();
  MadConnections(server_mad, server, client_mad, client, mgmt_class, n, window);
  Clocks t3 = Now();
  Report("qp", t0, t1, n);
  Report("mads", t1, t2, n);
  Report(("mads/" + std::to_string(window)).c_str(), t2, t3, n);
  printf("floor = qp + mads/%d: process CPU %.3f ms/conn, VM busy %.3f ms/conn\n", window,
         ((t1.self_cpu_ms - t0.self_cpu_ms) + (t3.self_cpu_ms - t2.self_cpu_ms)) / n,
         ((t1.vm_busy_ms - t0.vm_busy_ms) + (t3.vm_busy_ms - t2.vm_busy_ms)) / n);

  for (End* e : {&server, &client}) {
    for (ibv_qp* qp : e->qps) ibv_destroy_qp(qp);
    ibv_destroy_cq(e->cq);
    ibv_dealloc_pd(e->pd);
    ibv_close_device(e->ctx);
  }
  umad_close_port(server_mad.fd);
  umad_close_port(client_mad.fd);
  return 0;
}
