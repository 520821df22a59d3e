// A client slower than the wire: uscmd's frames to it wait in order while its
// socket is full, instead of being lost. (Losing them turned cmtime -c 1000's
// burst of REQs for one drop-in server into a storm of CM retries.)
#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cm/cm_testing.h"
#include "cm/endpoint.h"
#include "cm/router/frame.h"
#include "cm/router/router_testing.h"
#include "cm/router/server.h"
#include "gtest/gtest.h"

namespace uscm::router {
namespace {

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;

class ServerBackpressureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ShortSocketDir();
    auto p = testing::OpenSimPorts(/*seed=*/3);
    ASSERT_TRUE(p.ok()) << p.status();
    sim_ = std::move(*p);
    ServerOptions o;
    o.socket_path = dir_ + "/uscmd.sock";
    o.pump = [] { return mad::Duration::Millis(1); };
    o.client_send_buffer = 16 << 10;  // as small as a default wmem_max makes it, and less
    auto s = Server::Create(*sim_.host1, o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, o.socket_path.data(), o.socket_path.size());
    ASSERT_EQ(connect(client_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << strerror(errno);
  }
  void TearDown() override {
    if (client_ >= 0) close(client_);
    server_.reset();
    rmdir(dir_.c_str());
  }

  // Sends `frame` from the client, letting the server read while the
  // client's socket is full (a set-up step, retried with a bound).
  bool ClientSend(const std::vector<uint8_t>& frame) {
    for (int tries = 0; tries < 10000; ++tries) {
      if (send(client_, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return true;
      if (errno != EAGAIN) return false;
      if (!server_->RunOnce(mad::Duration::Millis(10)).ok()) return false;
    }
    return false;
  }

  // Every frame the server has for the client, running the server whenever
  // the socket is empty, until `want` frames came or the server had nothing
  // more for 50 turns in a row.
  std::vector<std::vector<uint8_t>> ClientReceive(size_t want) {
    std::vector<std::vector<uint8_t>> got;
    std::vector<uint8_t> buf(kMaxFrameBytes);
    int idle = 0;
    while (got.size() < want && idle < 50) {
      const ssize_t n = recv(client_, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n > 0) {
        got.emplace_back(buf.begin(), buf.begin() + n);
        idle = 0;
        continue;
      }
      if (!server_->RunOnce(mad::Duration::Millis(10)).ok()) break;
      ++idle;
    }
    return got;
  }

  std::string dir_;
  testing::SimPorts sim_;
  std::unique_ptr<Server> server_;
  int client_ = -1;
};

// 4,000 answers for a client that reads none of them until the end: far more
// than its socket holds (16 KiB here; net.core.wmem_max caps any SO_SNDBUF),
// so most of them must wait.
TEST_F(ServerBackpressureTest, FramesForAClientThatDoesNotReadWaitInOrder) {
  constexpr uint32_t kFrames = 4000;
  ASSERT_TRUE(ClientSend(EncodeHello(Hello{static_cast<uint32_t>(getpid())})));
  for (uint32_t r = 1; r <= kFrames; ++r) {
    ASSERT_TRUE(ClientSend(EncodeClaim(FrameType::kRelease, ClaimFrame{r, kSid, ~uint64_t{0}})))
        << "release " << r;
  }
  ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(10)).ok());
  // The set-up reached what it is for: the socket was full.
  EXPECT_GT(server_->counters().queued_to_client, 0u);

  auto frames = ClientReceive(kFrames + 1);
  ASSERT_EQ(frames.size(), kFrames + 1) << "frames lost on the way to the client";
  EXPECT_TRUE(DecodeWelcome(frames[0]).ok());
  for (uint32_t r = 1; r <= kFrames; ++r) {
    auto reply = DecodeReply(frames[r]);
    ASSERT_TRUE(reply.ok()) << "frame " << r << ": " << reply.status();
    ASSERT_EQ(reply->request, r) << "out of order";
  }
  EXPECT_EQ(server_->counters().dropped_to_client, 0u);
  EXPECT_GT(server_->counters().max_client_queue, 0u);
}

// While a client's frames wait in its queue, a peer's retransmission of a
// MAD that is still waiting there is not queued again (the client would only
// answer it as a duplicate: under load each answer lengthened the peer's own
// queue, cmtime's retry storm). A different MAD is queued; once the first copy
// has gone to the socket, a later copy is queued again.
TEST_F(ServerBackpressureTest, ACopyOfAMadStillQueuedIsNotQueuedAgain) {
  ASSERT_TRUE(ClientSend(EncodeHello(Hello{static_cast<uint32_t>(getpid())})));
  ASSERT_TRUE(ClientSend(EncodeClaim(FrameType::kClaim, ClaimFrame{1, kSid, ~uint64_t{0}})));
  for (uint32_t r = 2; r <= 1000; ++r) {  // replies that fill the socket
    ASSERT_TRUE(ClientSend(EncodeClaim(FrameType::kRelease, ClaimFrame{r, kSid + 1, ~uint64_t{0}})));
  }
  ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(10)).ok());
  ASSERT_GT(server_->counters().queued_to_client, 0u) << "set-up: the socket is full";

  // A peer on host2 connects twice to the client's service.
  cm::CmEndpoint peer(sim_.host2->port(), cm::testing::TestConfig(), 5);
  auto connect = [&](uint32_t qpn) {
    cm::ConnectParams p = cm::testing::MakeConnect(qpn);
    p.service_id = kSid;
    p.primary.local_lid = sim_.host2->port().lid;
    p.primary.remote_lid = sim_.host1->port().lid;
    p.primary.local_gid = sim_.host2->port().gid;
    p.primary.remote_gid = sim_.host1->port().gid;
    ASSERT_TRUE(peer.Connect(sim_.scheduler->Now(), p).ok());
  };
  std::vector<cm::OutgoingMad> reqs;
  for (uint32_t qpn : {0x101u, 0x102u}) {
    connect(qpn);
    cm::OutgoingMad m;
    while (peer.PollTransmit(&m)) reqs.push_back(m);
  }
  ASSERT_EQ(reqs.size(), 2u);
  // The first REQ five times (what its retransmissions carry), then the second.
  auto wire = [&](const cm::OutgoingMad& m) {
    ASSERT_TRUE(sim_.host2->Send(m.to, m.mad).ok());
    ASSERT_TRUE(sim_.scheduler->RunUntilIdle().ok());
    ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(1)).ok());
  };
  for (int i = 0; i < 5; ++i) wire(reqs[0]);
  wire(reqs[1]);
  EXPECT_EQ(server_->counters().duplicates_not_queued, 4u);

  auto mads = [](const std::vector<std::vector<uint8_t>>& frames) {
    int n = 0;
    for (const auto& f : frames) n += PeekFrame(f).ok() && *PeekFrame(f) == FrameType::kMad;
    return n;
  };
  EXPECT_EQ(mads(ClientReceive(1 + 1000 + 6)), 2) << "one of each REQ";  // welcome, replies, all
  // Nothing waits any more: a retransmission now is the client's to answer.
  wire(reqs[0]);
  EXPECT_EQ(mads(ClientReceive(1)), 1);
  EXPECT_EQ(server_->counters().duplicates_not_queued, 4u);
}

// A client that goes away with frames queued: nothing is sent to the dead
// socket, the router forgets the client, and a new client is served.
TEST_F(ServerBackpressureTest, AClientGoneWithQueuedFramesIsForgotten) {
  ASSERT_TRUE(ClientSend(EncodeHello(Hello{1})));
  for (uint32_t r = 1; r <= 4000; ++r) {
    ASSERT_TRUE(ClientSend(EncodeClaim(FrameType::kRelease, ClaimFrame{r, kSid, ~uint64_t{0}})));
  }
  ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(10)).ok());
  ASSERT_GT(server_->counters().queued_to_client, 0u);
  close(client_);
  client_ = -1;
  for (int i = 0; i < 100 && server_->router().client_count() > 0; ++i) {
    ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(10)).ok());
  }
  EXPECT_EQ(server_->router().client_count(), 0u);
  EXPECT_EQ(server_->router().counters().clients_gone, 1u);
}

}  // namespace
}  // namespace uscm::router
