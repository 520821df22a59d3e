// RouterTransport against a hand-made router on a real SOCK_SEQPACKET socket:
// what Drain reads and how many receive syscalls it takes for it.
#include "cm/router/router_transport.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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
  // What Connect says when the hello is answered with `answer`.
  absl::Status ConnectAnsweredWith(std::vector<uint8_t> answer) {
    std::thread t([this, &answer] {
      conn_fd_ = accept(listen_fd_, nullptr, nullptr);
      std::vector<uint8_t> hello(kMaxFrameBytes);
      (void)recv(conn_fd_, hello.data(), hello.size(), 0);
      (void)send(conn_fd_, answer.data(), answer.size(), 0);
    });
    auto transport = RouterTransport::Connect(path_, mad::Duration::Seconds(10));
    t.join();
    return transport.status();
  }
  const std::string& path() const { return path_; }
  // One MAD frame whose MAD's byte 16 is `tag`.
  void SendMad(uint8_t tag) {
    std::vector<uint8_t> mad(256, 0), frame;
    mad[0] = 1;
    mad[1] = 0x07;
    mad[16] = tag;
    EncodeMad(mad::MadAddress{}, mad, &frame);
    ASSERT_EQ(send(conn_fd_, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  }
  // The next claim or release frame the transport sent.
  ClaimFrame ReceiveClaim(FrameType* type) {
    std::vector<uint8_t> frame(kMaxFrameBytes);
    const ssize_t got = recv(conn_fd_, frame.data(), frame.size(), 0);
    EXPECT_GT(got, 0);
    frame.resize(got > 0 ? static_cast<size_t>(got) : 0);
    auto t = PeekFrame(frame);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) *type = *t;
    auto c = DecodeClaim(frame);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : ClaimFrame{};
  }
  void Reply(uint32_t request, absl::Status status) {
    const auto f = EncodeReply(ReplyFrame{request, std::move(status)});
    ASSERT_EQ(send(conn_fd_, f.data(), f.size(), 0), static_cast<ssize_t>(f.size()));
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

// A uscmd of another release answers the hello in its own frame version
// (here a refusal whose body this build could misread): the library names both
// versions and what to do, instead of a decoding error.
TEST(RouterTransportHello, AnAnswerOfAnotherReleaseSaysSoWithBothVersions) {
  for (uint8_t theirs : {uint8_t{kFrameVersion - 1}, uint8_t{kFrameVersion + 1}}) {
    FakeRouter router;
    std::vector<uint8_t> answer =
        EncodeRefused(absl::InvalidArgumentError("router: the first frame must be a hello"));
    answer[2] = theirs;
    absl::Status s = router.ConnectAnsweredWith(answer);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    const std::string want =
        absl::StrCat("the uscmd at ", router.path(), " speaks router frame version ", theirs,
                     " and the library version ", kFrameVersion, ": they come from different uscm releases");
    EXPECT_NE(s.message().find(want), std::string::npos) << s;
    EXPECT_NE(s.message().find("Restart uscmd"), std::string::npos) << s;
  }
}

// The same release's refusal still reads as the router's own reason.
TEST(RouterTransportHello, ARefusalOfTheSameReleaseKeepsItsReason) {
  FakeRouter router;
  absl::Status s = router.ConnectAnsweredWith(
      EncodeRefused(absl::ResourceExhaustedError("router: no free client slot")));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), "router: no free client slot");
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

// ReleaseServiceNoWait (an ephemeral port's release at rdma_destroy_id)
// returns before the router answers; the answer, when it comes, is dropped
// and counted, and the next claim gets its own answer. The router thread
// waits (10 s at most) for the call to return before it answers: a release
// that waited for its answer fails the first check.
TEST(RouterTransportRelease, NoWaitReturnsBeforeTheAnswerWhichIsDropped) {
  FakeRouter router;
  auto t = router.Connect();
  ASSERT_NE(t, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  bool returned = false, returned_before_answer = false;
  FrameType release_type{}, claim_type{};
  ClaimFrame release, claim;
  std::thread uscmd([&] {
    release = router.ReceiveClaim(&release_type);
    {
      std::unique_lock<std::mutex> lock(mu);
      returned_before_answer = cv.wait_for(lock, std::chrono::seconds(10), [&] { return returned; });
    }
    // The release's answer says "taken": if it were taken for the claim's,
    // the claim would fail.
    router.Reply(release.request, absl::AlreadyExistsError("not the claim's answer"));
    claim = router.ReceiveClaim(&claim_type);
    router.Reply(claim.request, absl::OkStatus());
  });
  t->ReleaseServiceNoWait(0x106000000001234, ~uint64_t{0}, {}, mad::ClaimKind::kBind);
  {
    std::lock_guard<std::mutex> lock(mu);
    returned = true;
  }
  cv.notify_all();
  const absl::Status claimed =
      t->ClaimService(0x106000000001234, ~uint64_t{0}, false, {}, mad::ClaimKind::kBind);
  uscmd.join();
  EXPECT_TRUE(returned_before_answer);
  EXPECT_EQ(release_type, FrameType::kRelease);
  EXPECT_EQ(release.service_id, 0x106000000001234u);
  EXPECT_EQ(claim_type, FrameType::kClaim);
  EXPECT_TRUE(claimed.ok()) << claimed;
  EXPECT_EQ(t->counters().unawaited_answers, 1u);
  EXPECT_TRUE(t->status().ok());
}

}  // namespace
}  // namespace uscm::router
