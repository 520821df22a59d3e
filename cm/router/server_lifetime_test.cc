// How long uscmd lives and where its socket comes from: --idle-exit (a router
// started on demand by `uscm exec` exits once no process uses it) and systemd
// socket activation (tools/uscmd.socket hands over a bound, listening socket).
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cm/router/frame.h"
#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "gtest/gtest.h"

namespace uscm::router {
namespace {

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;

// A client socket connected to `path` (no hello: enough to count as a client).
int ConnectRaw(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What systemd does for ListenSequentialPacket=: bind, chmod (SocketMode=), listen.
int BoundListener(const std::string& path, mode_t mode) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), mode) != 0 || listen(fd, 16) != 0) {
    return -1;
  }
  return fd;
}

class ServerLifetimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ShortSocketDir();
    path_ = dir_ + "/uscmd.sock";
    auto p = testing::OpenSimPorts(/*seed=*/3);
    ASSERT_TRUE(p.ok()) << p.status();
    sim_ = std::move(*p);
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  absl::StatusOr<std::unique_ptr<Server>> Make(mad::Duration idle_exit, int listen_fd = -1) {
    ServerOptions o;
    o.socket_path = path_;
    o.idle_exit = idle_exit;
    o.listen_fd = listen_fd;
    o.pump = [] { return mad::Duration::Millis(1); };
    return Server::Create(*sim_.host1, o);
  }

  std::string dir_, path_;
  testing::SimPorts sim_;
};

TEST_F(ServerLifetimeTest, IdleTimeCountsOnlyWhileNoClientIsConnected) {
  auto s = Make(mad::Duration::Seconds(60));
  ASSERT_TRUE(s.ok()) << s.status();
  Server& server = **s;
  const mad::TimePoint t0 = mad::TimePoint::Epoch() + mad::Duration::Seconds(1000);
  EXPECT_FALSE(server.IdleExpired(t0));  // idle from here
  EXPECT_FALSE(server.IdleExpired(t0 + mad::Duration::Seconds(59)));
  EXPECT_TRUE(server.IdleExpired(t0 + mad::Duration::Seconds(60)));

  const int client = ConnectRaw(path_);
  ASSERT_GE(client, 0);
  ASSERT_TRUE(server.RunOnce(mad::Duration::Millis(100)).ok());  // accepts it
  EXPECT_FALSE(server.IdleExpired(t0 + mad::Duration::Seconds(61)));
  EXPECT_FALSE(server.IdleExpired(t0 + mad::Duration::Seconds(500)));  // a client: never
  close(client);
  ASSERT_TRUE(server.RunOnce(mad::Duration::Millis(100)).ok());  // sees it leave
  EXPECT_FALSE(server.IdleExpired(t0 + mad::Duration::Seconds(501)));  // idle from here
  EXPECT_FALSE(server.IdleExpired(t0 + mad::Duration::Seconds(560)));
  EXPECT_TRUE(server.IdleExpired(t0 + mad::Duration::Seconds(561)));
}

TEST_F(ServerLifetimeTest, WithoutIdleExitTheServerIsNeverIdle) {
  auto s = Make(mad::Duration::Zero());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->IdleExpired(mad::TimePoint::Epoch()));
  EXPECT_FALSE((*s)->IdleExpired(mad::TimePoint::Epoch() + mad::Duration::Seconds(1 << 30)));
}

// Run() returns by itself (no Stop()) and says why; the socket file goes with it.
TEST_F(ServerLifetimeTest, RunReturnsOnItsOwnAfterTheIdleTime) {
  auto s = Make(mad::Duration::Millis(50));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Run().ok());
  EXPECT_TRUE((*s)->idle_exited());
  s->reset();
  struct stat st {};
  EXPECT_NE(stat(path_.c_str(), &st), 0) << "the socket file outlived the router";
}

// The wire as uscmd's umad port after `rdma link del`: lost for good
// (mad::UmadTransport::link_status once its file reads EIO).
class LosableWire final : public mad::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  absl::Status link_status() const override {
    return lost_.load() ? absl::UnavailableError("rxe9 port 1 is gone") : absl::OkStatus();
  }
  void Lose() { lost_ = true; }

 private:
  std::atomic<bool> lost_{false};
};

// Run() returns once the wire is lost, with a client still connected and no
// idle exit, says why, and the socket goes with it: the next program's start
// makes a new uscmd on the device added back. Before, uscmd lived on serving
// nothing (its umad file ready for ever), and the socket the next programs
// found was its: UNREACHABLE on the device added back (69-dropin-device-later).
TEST_F(ServerLifetimeTest, RunReturnsOnceTheWireIsLost) {
  LosableWire wire(*sim_.host1);
  ServerOptions o;
  o.socket_path = path_;
  o.pump = [] { return mad::Duration::Millis(1); };
  auto s = Server::Create(wire, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const int client = ConnectRaw(path_);
  ASSERT_GE(client, 0);
  ASSERT_TRUE((*s)->RunOnce(mad::Duration::Millis(100)).ok());  // accepts it
  EXPECT_TRUE((*s)->wire_lost().ok());
  wire.Lose();
  auto run = std::async(std::launch::async, [&] { return (*s)->Run(); });
  // A bound, not a measurement: without the check Run() never returns.
  if (run.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    (*s)->Stop();
    ADD_FAILURE() << "Run() went on with the wire lost";
  }
  EXPECT_TRUE(run.get().ok());
  EXPECT_FALSE((*s)->idle_exited());
  EXPECT_EQ((*s)->wire_lost().message(), "rxe9 port 1 is gone");
  s->reset();
  struct stat st {};
  EXPECT_NE(stat(path_.c_str(), &st), 0) << "the socket file outlived the router";
  close(client);
}

// A library of another release: its hello is refused in this uscmd's frame
// version with both versions named, counted apart from a client that sent no
// hello at all.
TEST_F(ServerLifetimeTest, AHelloOfAnotherReleaseIsRefusedWithBothVersions) {
  auto server = Make(mad::Duration::Seconds(0));
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = ConnectRaw(path_);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> hello = EncodeHello(Hello{42});
  hello[2] = kFrameVersion + 1;
  ASSERT_EQ(send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  std::vector<uint8_t> answer(kMaxFrameBytes);
  ssize_t got = -1;
  for (int i = 0; i < 1000 && got < 0; ++i) {
    ASSERT_TRUE((*server)->RunOnce(mad::Duration::Millis(10)).ok());
    got = recv(fd, answer.data(), answer.size(), MSG_DONTWAIT);
  }
  ASSERT_GT(got, 0) << "no answer to the hello";
  answer.resize(static_cast<size_t>(got));
  auto refused = DecodeRefused(answer);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->why.code(), absl::StatusCode::kFailedPrecondition) << refused->why;
  EXPECT_NE(refused->why.message().find(absl::StrCat("speaks router frame version ",
                                                     kFrameVersion, " and the library version ",
                                                     kFrameVersion + 1)),
            std::string::npos)
      << refused->why;
  EXPECT_EQ((*server)->counters().other_release_hellos, 1u);
  EXPECT_EQ((*server)->counters().bad_hello, 0u);
  close(fd);
}

TEST(ActivatedListenFd, TakesFdThreeOnlyWhenMeantForThisProcess) {
  EXPECT_EQ(*ActivatedListenFd(nullptr, nullptr, 42), -1);        // not activated
  EXPECT_EQ(*ActivatedListenFd("42", nullptr, 42), -1);
  EXPECT_EQ(*ActivatedListenFd("41", "1", 42), -1);               // a parent's, inherited
  EXPECT_EQ(*ActivatedListenFd("42", "1", 42), 3);
  auto two = ActivatedListenFd("42", "2", 42);
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("exactly one"), absl::string_view::npos);
  EXPECT_EQ(ActivatedListenFd("42", "0", 42).status().code(), absl::StatusCode::kInvalidArgument);
  auto junk = ActivatedListenFd("x42", "1", 42);
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(junk.status().message().find("not numbers"), absl::string_view::npos);
}

// The activated socket is served as it is: systemd's mode stays, nothing is
// bound or unlinked (the .socket unit keeps listening after uscmd exits).
TEST_F(ServerLifetimeTest, AnActivatedSocketIsServedAndLeftToItsOwner) {
  const int fd = BoundListener(path_, 0660);
  ASSERT_GE(fd, 0) << strerror(errno);
  {
    auto s = Make(mad::Duration::Zero(), fd);
    ASSERT_TRUE(s.ok()) << s.status();
    Server* server = s->get();
    std::thread loop([server] { (void)server->Run(); });
    auto t = RouterTransport::Connect(path_);
    const bool connected = t.ok();
    if (connected) {
      EXPECT_TRUE((*t)->ClaimService(kSid, ~uint64_t{0}, false).ok());
    }
    t = absl::UnavailableError("closed");
    server->Stop();
    loop.join();
    ASSERT_TRUE(connected);
    EXPECT_EQ(server->router().counters().clients_accepted, 1u);
  }
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0) << "the router unlinked systemd's socket";
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the activated fd stays open after the server";
}

TEST_F(ServerLifetimeTest, AnActivatedSocketOfTheWrongTypeIsRefusedClearly) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  auto s = Make(mad::Duration::Zero(), fd);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("ListenSequentialPacket="), absl::string_view::npos)
      << s.status();
}

}  // namespace
}  // namespace uscm::router
