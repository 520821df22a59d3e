// A small driver for the umad transport, run by the ibsim tests under
// LD_PRELOAD=libumad2sim.so. Each command prints "key=value" lines on stdout
// (one fact per line) so a test can check them; errors go to stderr with a
// non-zero exit status.
//
//   umad_client port                      local port state (no agents)
//   umad_client sa-cpi                    SA ClassPortInfo Get to the SM
//   umad_client sa-path [--dgid GID]      PathRecord GetTable SGID=own, DGID (default own)
//   umad_client cm-recv [--timeout-ms N] [--issm]  wait for one CM MAD, print it in hex
//                                         (--issm: on ibsim, claim IsSM to receive it)
//   umad_client cm-send --dlid L [--seed S]   send one REQ-shaped CM MAD to QP1 of L
//   umad_client bench [--n N]             N sequential ClassPortInfo Gets: mean/p50/p99
//
// MAD fields are read at raw byte offsets (IBTA vol 1 13.4.2 MAD header,
// 13.6.2 RMPP header, 15.2.1 SA header, 15.2.5.16 PathRecord).
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "mad/umad_transport.h"
#include "tests/ibsim/cm_pattern.h"

namespace uscm::mad {
namespace {

constexpr uint16_t kAttrClassPortInfo = 0x0001;
constexpr uint16_t kAttrPathRecord = 0x0035;

uint64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t Be32(std::span<const uint8_t> d, size_t o) {
  return (uint32_t{d[o]} << 24) | (uint32_t{d[o + 1]} << 16) | (uint32_t{d[o + 2]} << 8) | d[o + 3];
}
uint16_t Be16(std::span<const uint8_t> d, size_t o) {
  return static_cast<uint16_t>((d[o] << 8) | d[o + 1]);
}
void Put16(uint8_t* p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
void Put64(uint8_t* p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = v >> (56 - 8 * i); }

std::array<uint8_t, kMadSize> SaRequest(uint8_t method, uint16_t attr, uint32_t tid) {
  std::array<uint8_t, kMadSize> m{};
  m[0] = 1;     // BaseVersion
  m[1] = 0x03;  // MgmtClass SA
  m[2] = 2;     // ClassVersion
  m[3] = method;
  Put64(&m[8], tid);
  Put16(&m[16], attr);
  m[24] = 1;  // RMPPVersion (flags 0: not an RMPP transfer)
  return m;
}

MadAddress SmAddress(const LocalPort& p) {
  MadAddress a;
  a.lid = p.sm_lid;
  a.sl = p.sm_sl;
  return a;
}

// Waits until a MAD whose TID's lower 32 bits equal `tid` arrives.
bool AwaitResponse(UmadTransport& t, uint32_t tid, int timeout_ms, std::vector<uint8_t>* out) {
  const uint64_t deadline = NowNanos() + static_cast<uint64_t>(timeout_ms) * 1000000;
  bool got = false;
  while (!got && NowNanos() < deadline) {
    t.Drain([&](const ReceivedMad& r) {
      if (r.data.size() >= 24 && Be32(r.data, 12) == tid && (r.data[3] & 0x80)) {
        out->assign(r.data.begin(), r.data.end());
        got = true;
      }
    });
    if (got) break;
    pollfd pfd{t.fd(), POLLIN, 0};
    poll(&pfd, 1, 5);  // umad2sim intercepts poll(2) for its fake fd
  }
  return got;
}

void PrintHeader(const std::vector<uint8_t>& m) {
  printf("method=0x%02x\nstatus=0x%04x\nattr_id=0x%04x\ntid=0x%016llx\nlength=%zu\n", m[3],
         Be16(m, 4), Be16(m, 16),
         static_cast<unsigned long long>((uint64_t{Be32(m, 8)} << 32) | Be32(m, 12)), m.size());
}

int SaClassPortInfo(UmadTransport& t) {
  const uint32_t tid = 0x5a000001;
  auto req = SaRequest(0x01 /*Get*/, kAttrClassPortInfo, tid);
  if (auto s = t.Send(SmAddress(t.port()), req); !s.ok()) {
    fprintf(stderr, "send: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<uint8_t> m;
  if (!AwaitResponse(t, tid, 5000, &m)) {
    fprintf(stderr, "no ClassPortInfo response within 5 s\n");
    return 1;
  }
  PrintHeader(m);
  // ClassPortInfo in the SA data (offset 56): IBTA 13.4.8.1.
  printf("cpi.base_version=%u\ncpi.class_version=%u\ncpi.capability_mask=0x%04x\n"
         "cpi.resp_time_value=%u\n",
         m[56], m[57], Be16(m, 58), Be32(m, 60) & 0x1f);
  return 0;
}

int SaPathRecords(UmadTransport& t, const Gid& dgid) {
  const uint32_t tid = 0x5a000002;
  auto req = SaRequest(0x12 /*GetTable*/, kAttrPathRecord, tid);
  const uint64_t mask = (1ull << 2) | (1ull << 3) | (1ull << 11) | (1ull << 12);  // DGID SGID Reversible NumbPath
  Put64(&req[48], mask);
  uint8_t* pr = &req[56];
  std::memcpy(pr + 8, dgid.raw.data(), 16);
  std::memcpy(pr + 24, t.port().gid.raw.data(), 16);
  pr[49] = 0x80 | 1;  // Reversible, NumbPath 1
  if (auto s = t.Send(SmAddress(t.port()), req); !s.ok()) {
    fprintf(stderr, "send: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<uint8_t> m;
  if (!AwaitResponse(t, tid, 5000, &m)) {
    fprintf(stderr, "no PathRecord GetTable response within 5 s\n");
    return 1;
  }
  PrintHeader(m);
  printf("rmpp.version=%u\nrmpp.type=%u\nrmpp.flags=0x%x\nrmpp.status=%u\nrmpp.segment=%u\n"
         "rmpp.payload_length=%u\nsa.attr_offset=%u\n",
         m[24], m[25], m[26] & 0x7, m[27], Be32(m, 28), Be32(m, 32), Be16(m, 44));
  const size_t record = size_t{Be16(m, 44)} * 8;
  if (record >= 64 && m.size() >= 56 + record) {
    const uint8_t* p = &m[56];
    printf("path.dlid=%u\npath.slid=%u\npath.numb_path=%u\npath.pkey=0x%04x\n",
           (p[40] << 8) | p[41], (p[42] << 8) | p[43], p[49] & 0x7f, (p[50] << 8) | p[51]);
  }
  return 0;
}

int CmRecv(UmadTransport& t, int timeout_ms) {
  printf("ready lid=%u\n", t.port().lid);
  fflush(stdout);
  const uint64_t deadline = NowNanos() + static_cast<uint64_t>(timeout_ms) * 1000000;
  while (NowNanos() < deadline) {
    bool got = false;
    t.Drain([&](const ReceivedMad& r) {
      if (got || r.data.size() < 2 || r.data[1] != 0x07) return;
      got = true;
      printf("from.lid=%u\nfrom.qpn=%u\nlength=%zu\nhex=", r.from.lid, r.from.qpn, r.data.size());
      for (uint8_t b : r.data) printf("%02x", b);
      printf("\n");
    });
    if (got) return 0;
    pollfd pfd{t.fd(), POLLIN, 0};
    poll(&pfd, 1, 5);
  }
  const UmadStats& st = t.stats();
  fprintf(stderr,
          "no CM MAD within %d ms (received=%llu status_errors=%llu dropped_smp=%llu "
          "tail_zeroed=%llu)\n",
          timeout_ms, static_cast<unsigned long long>(st.received),
          static_cast<unsigned long long>(st.receive_status_errors),
          static_cast<unsigned long long>(st.dropped_smp),
          static_cast<unsigned long long>(st.sim_tail_zeroed));
  return 1;
}

int CmSend(UmadTransport& t, uint16_t dlid, uint32_t seed) {
  const auto mad = CmPatternMad(seed);
  MadAddress to;
  to.lid = dlid;
  if (auto s = t.Send(to, mad); !s.ok()) {
    fprintf(stderr, "send: %s\n", s.ToString().c_str());
    return 1;
  }
  printf("sent=1\n");
  return 0;
}

int Bench(UmadTransport& t, int n) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const uint32_t tid = 0x5b000000u + static_cast<uint32_t>(i);
    auto req = SaRequest(0x01, kAttrClassPortInfo, tid);
    const uint64_t t0 = NowNanos();
    if (auto s = t.Send(SmAddress(t.port()), req); !s.ok()) {
      fprintf(stderr, "send %d: %s\n", i, s.ToString().c_str());
      return 1;
    }
    std::vector<uint8_t> m;
    if (!AwaitResponse(t, tid, 5000, &m)) {
      fprintf(stderr, "request %d: no response within 5 s\n", i);
      return 1;
    }
    us.push_back(static_cast<double>(NowNanos() - t0) / 1e3);
  }
  double sum = 0;
  for (double v : us) sum += v;
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))]; };
  printf("n=%d\nmean_us=%.1f\np50_us=%.1f\np99_us=%.1f\nmax_us=%.1f\n", n, sum / n, pct(0.5),
         pct(0.99), us.back());
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: umad_client port|sa-cpi|sa-path|cm-recv|cm-send|bench [options]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  std::string dgid_text;
  int timeout_ms = 10000, n = 1000;
  uint32_t dlid = 0, seed = 1;
  UmadOptions o;
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--issm") {  // ibsim: receive unsolicited QP1 MADs
      o.sim_claim_issm = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "option %s needs a value\n", k.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    bool ok = true;
    if (k == "--dgid") dgid_text = v;
    else if (k == "--timeout-ms") ok = absl::SimpleAtoi(v, &timeout_ms);
    else if (k == "--n") ok = absl::SimpleAtoi(v, &n) && n > 0;
    else if (k == "--dlid") ok = absl::SimpleAtoi(v, &dlid) && dlid > 0 && dlid < 0xffff;
    else if (k == "--seed") ok = absl::SimpleAtoi(v, &seed);
    else ok = false;
    if (!ok) {
      fprintf(stderr, "bad option %s %s\n", k.c_str(), v.c_str());
      return 2;
    }
  }

  if (cmd == "port") {
    auto p = QueryUmadPort("", 0);
    if (!p.ok()) p = QueryUmadPort("", 1);  // port 0 = "first ACTIVE": fall back to port 1
    if (!p.ok()) {
      fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 1;
    }
    printf("ca=%s\nca_type=%s\nport=%u\nstate=%d\nlid=%u\nsm_lid=%u\ngid=%s\nnode_guid=0x%016llx\n",
           p->port.ca_name.c_str(), p->ca_type.c_str(), p->port.port_num, p->state, p->port.lid,
           p->port.sm_lid, p->port.gid.ToString().c_str(),
           static_cast<unsigned long long>(p->port.node_guid));
    return 0;
  }

  auto t = UmadTransport::Open(o);
  if (!t.ok()) {
    fprintf(stderr, "%s\n", t.status().ToString().c_str());
    return 1;
  }
  printf("transport=%s\nkernel_rmpp=%d\n", (*t)->caps().name.c_str(), (*t)->caps().kernel_rmpp);
  if (cmd == "sa-cpi") return SaClassPortInfo(**t);
  if (cmd == "sa-path") {
    Gid dgid = (*t)->port().gid;
    if (!dgid_text.empty()) {
      auto g = Gid::Parse(dgid_text);
      if (!g.ok()) {
        fprintf(stderr, "%s\n", g.status().ToString().c_str());
        return 2;
      }
      dgid = *g;
    }
    return SaPathRecords(**t, dgid);
  }
  if (cmd == "cm-recv") return CmRecv(**t, timeout_ms);
  if (cmd == "cm-send") {
    if (dlid == 0) {
      fprintf(stderr, "cm-send needs --dlid\n");
      return 2;
    }
    return CmSend(**t, static_cast<uint16_t>(dlid), seed);
  }
  if (cmd == "bench") return Bench(**t, n);
  fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}

}  // namespace
}  // namespace uscm::mad

namespace {
volatile sig_atomic_t exit_code = 0;
void ExitNow(int) { _exit(exit_code); }
}  // namespace

int main(int argc, char** argv) {
  const int rc = uscm::mad::Main(argc, argv);
  fflush(stdout);
  fflush(stderr);
  // umad2sim's atexit cleanup joins its receive thread while holding the lock
  // that thread takes for every packet: a MAD arriving during exit deadlocks
  // the process. Leave after 2 s regardless (the output is already flushed).
  exit_code = rc;
  signal(SIGALRM, ExitNow);
  alarm(2);
  return rc;
}
