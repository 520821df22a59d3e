// How uscmd reads its clients' sockets: every frame a client queued, in
// order, with one recvmmsg per batch (not a recv per frame and one more that
// says EAGAIN), a hello first, a close after frames still handled; the wire
// read only when epoll says it has something.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

class ServerReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ShortSocketDir();
    path_ = dir_ + "/uscmd.sock";
    auto p = testing::OpenSimPorts(/*seed=*/5);
    ASSERT_TRUE(p.ok()) << p.status();
    sim_ = std::move(*p);
    ServerOptions o;
    o.socket_path = path_;
    o.pump = [] { return mad::Duration::Millis(1); };
    auto s = Server::Create(*sim_.host1, o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  void TearDown() override {
    server_.reset();
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  // A client socket, accepted by the server (no hello yet).
  void ConnectClient() {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    for (int i = 0; i < 10 && server_->router().counters().clients_accepted == 0; ++i) {
      ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(100)).ok());
    }
  }
  void Send(const std::vector<uint8_t>& frame) {
    ASSERT_EQ(send(fd_, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  }
  // A listen claim on service ID 0x10000 + n (the router replies to each).
  static std::vector<uint8_t> Claim(uint8_t n) {
    return EncodeClaim(FrameType::kClaim,
                       ClaimFrame{n, 0x10000u + n, ~uint64_t{0}, false, {}, mad::ClaimKind::kListen});
  }

  std::string dir_, path_;
  testing::SimPorts sim_;
  std::unique_ptr<Server> server_;
  int fd_ = -1;
};

// Frames of the client the router took in: its claims.
uint64_t Handled(const Server& s) { return s.router().counters().claims; }

// A hello and five MADs queued before the server looks: one receive call
// takes all six (the old loop: seven, the last saying EAGAIN), the client is
// welcomed and the router takes the five claims.
TEST_F(ServerReadTest, AClientsQueuedFramesInOneReceiveCall) {
  ConnectClient();
  Send(EncodeHello(Hello{1234}));
  for (uint8_t tid = 1; tid <= 5; ++tid) Send(Claim(tid));
  const uint64_t calls = server_->counters().client_receive_calls;
  const uint64_t handled = Handled(*server_);
  ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(100)).ok());
  EXPECT_EQ(server_->counters().client_receive_calls - calls, 1u);
  EXPECT_EQ(Handled(*server_) - handled, 5u);
  std::vector<uint8_t> buf(kMaxFrameBytes);
  const ssize_t got = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
  ASSERT_GT(got, 0);
  EXPECT_TRUE(DecodeWelcome(std::span<const uint8_t>(buf.data(), got)).ok());
}

// More frames than one batch: every one handled, in order, over several calls
// of one turn; then a close after two more frames: both handled, then the
// client is gone.
TEST_F(ServerReadTest, MoreThanABatchThenFramesBeforeACloseAllHandled) {
  ConnectClient();
  Send(EncodeHello(Hello{1234}));
  for (uint8_t tid = 1; tid <= 20; ++tid) Send(Claim(tid));
  const uint64_t handled = Handled(*server_);
  ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(100)).ok());
  EXPECT_EQ(Handled(*server_) - handled, 20u);
  // The replies read first: a unix socket closed with unread data resets
  // its peer (ECONNRESET), which is not the close this test is about.
  std::vector<uint8_t> buf(kMaxFrameBytes);
  while (recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
  }
  Send(Claim(21));
  Send(Claim(22));
  close(fd_);
  fd_ = -1;
  ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(100)).ok());
  EXPECT_EQ(Handled(*server_) - handled, 22u);
  EXPECT_EQ(server_->router().counters().clients_gone, 1u);
}

// A wire with a real fd (an eventfd the test makes readable) that counts
// its drains and has nothing to hand out.
class CountingWire final : public mad::Transport {
 public:
  CountingWire() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) { port_.ca_name = "fake0"; }
  ~CountingWire() override { close(fd_); }
  absl::Status Send(const mad::MadAddress&, std::span<const uint8_t>) override {
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)>, size_t) override {
    ++drains;
    eventfd_t v;
    (void)eventfd_read(fd_, &v);  // consumed: not readable any more
    return 0;
  }
  int fd() const override { return fd_; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }
  void MakeReadable() { eventfd_write(fd_, 1); }
  int drains = 0;

 private:
  int fd_;
  mad::TransportCaps caps_;
  mad::LocalPort port_;
};

// A turn woken by a client reads no wire (before: a umad read that said
// EAGAIN on every wake); a readable wire is read.
TEST(ServerWire, ReadOnlyWhenEpollReportsIt) {
  const std::string dir = testing::ShortSocketDir(), path = dir + "/uscmd.sock";
  CountingWire wire;
  ServerOptions o;
  o.socket_path = path;
  auto s = Server::Create(wire, o);
  ASSERT_TRUE(s.ok()) << s.status();
  Server& server = **s;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const auto hello = EncodeHello(Hello{99});
  ASSERT_EQ(send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  for (int i = 0; i < 10 && server.router().counters().clients_accepted == 0; ++i) {
    ASSERT_TRUE(server.RunOnce(mad::Duration::Millis(100)).ok());
  }
  EXPECT_EQ(server.router().counters().clients_accepted, 1u);
  EXPECT_EQ(wire.drains, 0);
  EXPECT_EQ(server.counters().wire_polls, 0u);
  wire.MakeReadable();
  ASSERT_TRUE(server.RunOnce(mad::Duration::Millis(100)).ok());
  EXPECT_EQ(wire.drains, 1);
  close(fd);
  s->reset();
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace uscm::router
