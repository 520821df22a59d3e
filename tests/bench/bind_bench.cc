// rdma_bind_addr to port 0 through uscmd, per id: the drop-in's Device on a
// RouterTransport to a real uscmd Server (its wire the simulated fabric), in
// two modes alternating in one process: "claims" (a server that leases no
// blocks, max_blocks_per_client = 0: each bind is a claim, one round trip,
// as before port blocks, plus one refused lease per 256 binds) and "blocks"
// (port blocks: a CAS in the leased page, one lease per 256 binds). Each
// round creates N ids, binds each to 192.168.78.1:0 (timed), destroys them
// (timed). Not a test: the figures are for docs/ROUTER.md.
//
//   bind_bench [--ids N] [--rounds R]   (default 1000, 5)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"

namespace uscm {
namespace {

using Clock = std::chrono::steady_clock;

double UsPerId(Clock::duration d, int n) {
  return std::chrono::duration<double, std::micro>(d).count() / n;
}

int Run(int ids, int rounds) {
  const std::string dir = router::testing::ShortSocketDir();
  std::printf("mode,round,ids,bind_us_per_id,destroy_us_per_id,claims,leases\n");
  for (int round = 0; round < rounds; ++round) {
    for (const bool blocks : {false, true}) {
      auto sim = router::testing::OpenSimPorts(/*seed=*/round + 1);
      if (!sim.ok()) return std::fprintf(stderr, "%s\n", sim.status().ToString().c_str()), 1;
      router::ServerOptions o;
      o.socket_path = dir + "/bind_bench.sock";
      o.pump = [] { return mad::Duration::Millis(1); };
      if (!blocks) o.router.max_blocks_per_client = 0;
      auto server = router::Server::Create(*sim->host1, o);
      if (!server.ok()) return std::fprintf(stderr, "%s\n", server.status().ToString().c_str()), 1;
      size_t claims = 0;
      uint64_t leases = 0;
      double bind_us = 0, destroy_us = 0;
      {
        router::testing::LoopThread loop(server->get());
        auto t = router::RouterTransport::Connect(o.socket_path);
        if (!t.ok()) return std::fprintf(stderr, "%s\n", t.status().ToString().c_str()), 1;
        DeviceOptions d;
        d.roce = true;
        d.local_ips = {*Address::Parse("192.168.78.1")};
        auto dev = Device::Create(**t, d);
        if (!dev.ok()) return std::fprintf(stderr, "%s\n", dev.status().ToString().c_str()), 1;
        auto ch = (*dev)->CreateEventChannel();
        if (!ch.ok()) return 1;
        std::vector<CmId*> v;
        for (int i = 0; i < ids; ++i) v.push_back(*(*ch)->CreateId(nullptr, PortSpace::kTcp));
        const Address src = *Address::Parse("192.168.78.1:0");
        const Clock::time_point t0 = Clock::now();
        for (CmId* id : v) {
          if (absl::Status s = id->BindAddr(src); !s.ok()) {
            std::fprintf(stderr, "bind: %s\n", s.ToString().c_str());
            return 1;
          }
        }
        const Clock::time_point t1 = Clock::now();
        for (CmId* id : v) (void)(*ch)->DestroyId(id);
        const Clock::time_point t2 = Clock::now();
        bind_us = UsPerId(t1 - t0, ids);
        destroy_us = UsPerId(t2 - t1, ids);
        ch->reset();
        dev->reset();
        t->reset();
        loop.Stop();
        claims = (*server)->router().counters().claims;
        leases = (*server)->router().counters().leases;
      }
      std::printf("%s,%d,%d,%.2f,%.2f,%zu,%llu\n", blocks ? "blocks" : "claims", round, ids,
                  bind_us, destroy_us, claims, static_cast<unsigned long long>(leases));
      std::fflush(stdout);
      server->reset();
    }
  }
  rmdir(dir.c_str());
  return 0;
}

}  // namespace
}  // namespace uscm

int main(int argc, char** argv) {
  int ids = 1000, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ids") == 0) (void)absl::SimpleAtoi(argv[i + 1], &ids);
    if (std::strcmp(argv[i], "--rounds") == 0) (void)absl::SimpleAtoi(argv[i + 1], &rounds);
  }
  return uscm::Run(ids, rounds);
}
