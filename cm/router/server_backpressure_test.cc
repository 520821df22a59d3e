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
