// Port blocks over uscmd's socket: the lease reply's page travels as a memfd
// (SCM_RIGHTS), the client maps it, and a claim the client makes in it is
// what the server sees when another client binds the port.
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "gtest/gtest.h"
#include "mad/status_errno.h"

namespace uscm::router {
namespace {

constexpr uint16_t kTcp = 0x0106;
uint64_t Sid(uint16_t port) { return uint64_t{kTcp} << 16 | port; }

TEST(ServerLeaseTest, ALeaseCarriesItsPageAcrossTheSocket) {
  const std::string dir = testing::ShortSocketDir();
  const std::string path = dir + "/uscmd.sock";
  auto sim = testing::OpenSimPorts(/*seed=*/3);
  ASSERT_TRUE(sim.ok()) << sim.status();
  ServerOptions o;
  o.socket_path = path;
  o.pump = [] { return mad::Duration::Millis(1); };
  o.router.ephemeral_low = 50000;
  o.router.ephemeral_high = 50999;
  auto server = Server::Create(*sim->host1, o);
  ASSERT_TRUE(server.ok()) << server.status();
  {
    testing::LoopThread loop(server->get());
    auto a = RouterTransport::Connect(path);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = RouterTransport::Connect(path);
    ASSERT_TRUE(b.ok()) << b.status();
    auto lease = (*a)->LeasePorts(kTcp);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(lease->first_port, 50000);
    ASSERT_EQ(lease->page->size(), 256u);
    EXPECT_GE(lease->page->fd(), 0) << "a memfd, not the heap";
    ASSERT_TRUE(lease->page->Claim(0));
    const mad::ListenAddress at = mad::ListenAddress::Ipv4(0xC0A84D64);
    absl::Status s = (*b)->ClaimService(Sid(50000), ~uint64_t{0}, false, at,
                                        mad::ClaimKind::kBind);
    EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
    EXPECT_TRUE((*b)->ClaimService(Sid(50001), ~uint64_t{0}, false, at, mad::ClaimKind::kBind)
                    .ok());
    EXPECT_EQ(lease->page->Load(1), static_cast<uint8_t>(mad::PortPage::State::kTaken));
    // A transport that owns its port leases nothing.
    mad::Transport& owner = *sim->host2;
    EXPECT_EQ(owner.LeasePorts(kTcp).status().code(), absl::StatusCode::kUnimplemented);
    loop.Stop();
  }
  EXPECT_EQ((*server)->router().counters().leases, 1u);
  server->reset();
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace uscm::router
