// RouterTransport against a hand-made router on a real SOCK_SEQPACKET socket:
// what Drain reads and how many receive syscalls it takes for it.
#include "cm/router/router_transport.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "cm/router/frame.h"
#include "gtest/gtest.h"

namespace uscm::router {
namespace {

// A router that answers the hello with a welcome, then hands the connected
// socket to the test (which writes frames into it as uscmd would).
class FakeRouter {
 public:
  FakeRouter() {
    char dir[] = "/tmp/router_transport_test.XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/sock";
    listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
  }
  ~FakeRouter() {
    if (conn_fd_ >= 0) close(conn_fd_);
    close(listen_fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  // Connects a transport; the accept and the welcome run on a thread.
  std::unique_ptr<RouterTransport> Connect() {
    std::thread t([this] {
      conn_fd_ = accept(listen_fd_, nullptr, nullptr);
      std::vector<uint8_t> hello(kMaxFrameBytes);
      (void)recv(conn_fd_, hello.data(), hello.size(), 0);
      Welcome welcome;
      welcome.slot = 1;
      welcome.comm_id_prefix_bits = 8;
      welcome.comm_id_prefix = 1;
      const auto w = EncodeWelcome(welcome);
      (void)send(conn_fd_, w.data(), w.size(), 0);
    });
    auto transport = RouterTransport::Connect(path_, mad::Duration::Seconds(10));
    t.join();
    EXPECT_TRUE(transport.ok()) << transport.status();
    return transport.ok() ? *std::move(transport) : nullptr;
  }
  // One MAD frame whose MAD's byte 16 is `tag`.
  void SendMad(uint8_t tag) {
    std::vector<uint8_t> mad(256, 0), frame;
    mad[0] = 1;
    mad[1] = 0x07;
    mad[16] = tag;
    EncodeMad(mad::MadAddress{}, mad, &frame);
    ASSERT_EQ(send(conn_fd_, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  }
  void Close() {
    close(conn_fd_);
    conn_fd_ = -1;
  }

 private:
  std::string dir_, path_;
  int listen_fd_ = -1, conn_fd_ = -1;
};

std::vector<uint8_t> DrainTags(RouterTransport& t, size_t max = SIZE_MAX) {
  std::vector<uint8_t> tags;
  t.Drain([&](const mad::ReceivedMad& m) { tags.push_back(m.data[16]); }, max);
  return tags;
}

// Five frames queued: one recvmmsg takes them all and, short of its batch,
// says the socket is empty (a recv per frame and one more for EAGAIN: 6).
TEST(RouterTransportDrain, TakesEveryQueuedFrameInOneReceiveCall) {
  FakeRouter router;
  auto t = router.Connect();
  ASSERT_NE(t, nullptr);
  for (uint8_t tag = 1; tag <= 5; ++tag) router.SendMad(tag);
  const uint64_t calls = t->counters().receive_calls;
  EXPECT_EQ(DrainTags(*t), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(t->counters().receive_calls - calls, 1u);
  EXPECT_EQ(t->counters().received, 5u);
  // Nothing queued: one call, nothing handed out.
  EXPECT_TRUE(DrainTags(*t).empty());
  EXPECT_EQ(t->counters().receive_calls - calls, 2u);
}

// More than a batch: in order, every frame once, the batch refilled until
// one comes back short; `max` is honoured and the rest stays for later.
TEST(RouterTransportDrain, MoreThanABatchInOrderAndMaxHonoured) {
  FakeRouter router;
  auto t = router.Connect();
  ASSERT_NE(t, nullptr);
  for (uint8_t tag = 1; tag <= 20; ++tag) router.SendMad(tag);
  std::vector<uint8_t> first = DrainTags(*t, 3);
  EXPECT_EQ(first, (std::vector<uint8_t>{1, 2, 3}));
  std::vector<uint8_t> rest = DrainTags(*t);
  ASSERT_EQ(rest.size(), 17u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], 4 + i);
}

// The router gone after two frames: both are handed out, then the transport
// reports the loss (the frames before the EOF are not lost with it).
TEST(RouterTransportDrain, FramesBeforeTheRoutersCloseAreKeptThenTheLossReported) {
  FakeRouter router;
  auto t = router.Connect();
  ASSERT_NE(t, nullptr);
  router.SendMad(7);
  router.SendMad(8);
  router.Close();
  EXPECT_EQ(DrainTags(*t), (std::vector<uint8_t>{7, 8}));
  EXPECT_FALSE(t->status().ok());
  EXPECT_TRUE(DrainTags(*t).empty());
}

}  // namespace
}  // namespace uscm::router
