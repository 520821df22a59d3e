// A wildcard bind and listen of the drop-in on two ports, each shared with
// other processes through its own router (cm/router LocalRouter, one per
// port): the kernel's bind list is the host's, so the bind and the listen
// hold on every port or on none. Another process (a Device on port 2's
// router) holds 10.0.0.2; the drop-in's ports are 10.0.0.1 (port 1) and
// 10.0.0.2 (port 2). Only claims move here: no MAD, no virtual time.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "api/librdmacm/port_resync.h"
#include "api/librdmacm/ports.h"
#include "api/librdmacm/uevents_testing.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/router/local_router.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"

namespace uscm::librdmacm {
namespace {

Addr16 V4(const char* ip) {
  Addr16 a{};
  a[10] = a[11] = 0xff;
  inet_pton(AF_INET, ip, &a[12]);
  return a;
}

// One process's Device on a router.
struct OnRouter {
  std::unique_ptr<router::LocalRouterClient> client;
  std::unique_ptr<Device> device;
};

class WildcardPortsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<sim::Scheduler>(17);
    auto f = sim::Fabric::Create(*sched_, sim::TwoHostsOneSwitch());
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    const char* ips[2] = {"10.0.0.1", "10.0.0.2"};
    for (int port = 0; port < 2; ++port) {
      auto qp1 = fabric_->Open(port == 0 ? "host1" : "host2");
      ASSERT_TRUE(qp1.ok()) << qp1.status();
      qp1_[port] = std::move(*qp1);
      routers_[port] = std::make_unique<router::LocalRouter>(*qp1_[port]);
      ASSERT_NO_FATAL_FAILURE(Join(port, ips[port], &mine_[port]));
      handles_[port] = uscm_device_wrap(mine_[port].device.get());
    }
    ASSERT_NO_FATAL_FAILURE(Join(1, ips[1], &other_));
    auto ch = other_.device->CreateEventChannel();
    ASSERT_TRUE(ch.ok()) << ch.status();
    other_ch_ = std::move(*ch);
    if (PortsAtStart() == 2) {
      ASSERT_EQ(UseDevicesForTesting({handles_[0], handles_[1]}, {{V4(ips[0])}, {V4(ips[1])}}), 0)
          << strerror(errno);
    } else {
      ASSERT_EQ(UseDevicesForTesting({handles_[0]}, {{V4(ips[0])}}), 0) << strerror(errno);
    }
    ch_ = NewEventChannel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    rdma_destroy_event_channel(ch_);
    ResetBackendForTesting();
    SetPortQueryForTesting(nullptr, nullptr);
    other_ch_.reset();
    other_ = {};
    for (int port = 0; port < 2; ++port) {
      uscm_device_unwrap_free(handles_[port]);
      mine_[port] = {};
      routers_[port].reset();
    }
  }

  // The drop-in's ports when the test starts (the others come later).
  virtual int PortsAtStart() const { return 2; }

  void Join(int port, const char* ip, OnRouter* p) {
    auto c = routers_[port]->Connect();
    ASSERT_TRUE(c.ok()) << c.status();
    p->client = std::move(*c);
    DeviceOptions o;
    o.roce = true;
    o.local_ips = {*Address::Parse(ip)};
    router::LocalRouterClient* raw = p->client.get();
    auto dev = Device::CreateSimulated(*sched_, *p->client, [raw] { return raw->pending() > 0; }, o);
    ASSERT_TRUE(dev.ok()) << dev.status();
    p->device = std::move(*dev);
  }
  // Another process's id on port 2, bound to `addr` ("10.0.0.2:7000").
  CmId* OtherBinds(const char* addr, bool reuse) {
    CmId* id = *other_ch_->CreateId(nullptr, PortSpace::kTcp);
    IdOptions o = id->options();
    o.reuse_addr = reuse;
    EXPECT_TRUE(id->SetOption(o).ok());
    absl::Status s = id->BindAddr(*Address::Parse(addr));
    EXPECT_TRUE(s.ok()) << s;
    return id;
  }
  rdma_cm_id* NewId(bool reuse) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    int one = 1;
    if (reuse) {
      EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one), 0);
    }
    return id;
  }
  int Bind(rdma_cm_id* id, uint16_t port) {
    sockaddr_in any = Ipv4("0.0.0.0", port);
    return rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any));
  }
  size_t Claims(int port) const { return routers_[port]->router().claim_count(); }

  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sim::SimTransport> qp1_[2];
  std::unique_ptr<router::LocalRouter> routers_[2];
  OnRouter mine_[2];
  uscm_device* handles_[2] = {nullptr, nullptr};
  OnRouter other_;
  std::unique_ptr<EventChannel> other_ch_;
  rdma_event_channel* ch_ = nullptr;
};

TEST_F(WildcardPortsTest, AWildcardBindRefusedOnOnePortHoldsNoPort) {
  CmId* theirs = OtherBinds("10.0.0.2:7000", false);
  rdma_cm_id* id = NewId(false);
  errno = 0;
  EXPECT_EQ(Bind(id, 7000), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL) << "[0.0.0.0] against the other's 10.0.0.2";
  EXPECT_EQ(Claims(0), 0u) << "port 1's bind undone";
  EXPECT_EQ(Claims(1), 1u) << "the other process's alone";
  EXPECT_EQ(rdma_get_src_port(id), 0) << "unbound, as the kernel leaves it";
  // The id binds again elsewhere and listens on both ports.
  ASSERT_EQ(Bind(id, 7001), 0) << strerror(errno);
  EXPECT_EQ(Claims(0), 1u);
  EXPECT_EQ(Claims(1), 2u);
  ASSERT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
  EXPECT_EQ(Claims(0), 2u) << "a bind and a listen claim";
  EXPECT_EQ(Claims(1), 3u);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(Claims(0), 0u);
  EXPECT_EQ(Claims(1), 1u);
  ASSERT_TRUE(other_ch_->DestroyId(theirs).ok());
}

TEST_F(WildcardPortsTest, AWildcardListenRefusedOnOnePortListensOnNone) {
  // Both set REUSEADDR: the binds share port 7002; a listen does not.
  CmId* theirs = OtherBinds("10.0.0.2:7002", true);
  rdma_cm_id* id = NewId(true);
  ASSERT_EQ(Bind(id, 7002), 0) << strerror(errno);
  EXPECT_EQ(Claims(0), 1u);
  EXPECT_EQ(Claims(1), 2u);
  errno = 0;
  EXPECT_EQ(rdma_listen(id, 4), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL) << "[0.0.0.0] against the other's 10.0.0.2";
  EXPECT_EQ(Claims(0), 1u) << "port 1's listen undone, its bind kept";
  EXPECT_EQ(Claims(1), 2u);
  // Once the other process's id goes, the same id listens on both.
  ASSERT_TRUE(other_ch_->DestroyId(theirs).ok());
  ASSERT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
  EXPECT_EQ(Claims(0), 2u);
  EXPECT_EQ(Claims(1), 2u);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(Claims(0), 0u);
  EXPECT_EQ(Claims(1), 0u);
}

TEST_F(WildcardPortsTest, AnEphemeralWildcardSkipsAPortAnotherProcessHolds) {
  rdma_cm_id* id = NewId(false);
  ASSERT_EQ(Bind(id, 0), 0) << strerror(errno);
  const uint16_t first = ntohs(rdma_get_src_port(id));
  ASSERT_NE(first, 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  // The other process holds the port the drop-in's port 1 would pick next
  // time on port 2 only: the bind moves on to a port free on both.
  CmId* theirs = OtherBinds(("10.0.0.2:" + std::to_string(first + 1)).c_str(), false);
  id = NewId(false);
  ASSERT_EQ(Bind(id, 0), 0) << strerror(errno);
  const uint16_t second = ntohs(rdma_get_src_port(id));
  EXPECT_NE(second, first + 1);
  EXPECT_NE(second, 0);
  // Port 1 took the port from a block its router leased (no claim there,
  // docs/ROUTER.md "Port blocks"); port 2 binds it by number (a claim).
  EXPECT_EQ(Claims(0), 0u);
  EXPECT_EQ(Claims(1), 2u);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  ASSERT_TRUE(other_ch_->DestroyId(theirs).ok());
}

// The uscm-ports thread (port_resync.h) runs while a wildcard-bound id
// exists, listening or not, and is joined once the last one is destroyed; a
// child of fork() has none of its parent's threads or wildcard ids (the
// parent's listener is refused there) and starts its own.
TEST_F(WildcardPortsTest, TheFirstWildcardIdStartsThePortThreadAndTheLastStopsIt) {
  // No step during the test: under load it can outlast a 1 s period, and a
  // step's listing and opens run without the lock (a fork then copies the
  // step half done; fork_locks.h covers the locked parts only).
  SetPortResyncPeriodForTesting(3'600'000);
  AllowPortResyncThreadForTesting(true);
  EXPECT_FALSE(PortResyncRunning());
  const uint64_t waits = PortResyncWaits();
  rdma_cm_id* specific = NewId(false);
  sockaddr_in one = Ipv4("10.0.0.1", 7011);
  ASSERT_EQ(rdma_bind_addr(specific, reinterpret_cast<sockaddr*>(&one)), 0) << strerror(errno);
  EXPECT_FALSE(PortResyncRunning()) << "an address of one port: no thread";
  rdma_cm_id* bound = NewId(false);
  ASSERT_EQ(Bind(bound, 7012), 0) << strerror(errno);
  EXPECT_TRUE(PortResyncRunning()) << "a wildcard bind, not listening";
  rdma_cm_id* listener = NewId(false);
  ASSERT_EQ(Bind(listener, 7013), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(bound), 0);
  EXPECT_TRUE(PortResyncRunning()) << "the listener still needs it";

  // Forked once the thread waits: under ASan (GCC 12's libsanitizer) a fork
  // while another thread is in the sanitizer's allocator leaves its lock held
  // in the child (seen: 1 run in 30, the child's own thread blocked in the
  // allocator at its start), whatever the thread.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (PortResyncWaits() == waits && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_NE(PortResyncWaits(), waits) << "the thread never waited";
  const pid_t child = fork();
  if (child == 0) {
    // No gtest assertion here: the exit code says what failed.
    if (PortResyncRunning()) _exit(1);
    // Its own channel and id (the parent's are the parent's: EACCES, as the
    // kernel refuses the parent's rdma_cm fd in a child).
    rdma_event_channel* own = NewEventChannel();
    rdma_cm_id* mine = nullptr;
    if (own == nullptr || rdma_create_id(own, &mine, nullptr, RDMA_PS_TCP) != 0) _exit(6);
    if (Bind(mine, 7014) != 0) _exit(2);
    if (!PortResyncRunning()) _exit(3);
    if (rdma_destroy_id(listener) == 0 || errno != EACCES) _exit(7);
    if (rdma_destroy_id(mine) != 0) _exit(4);
    _exit(PortResyncRunning() ? 5 : 0);
  }
  ASSERT_GT(child, 0) << strerror(errno);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's step " << WEXITSTATUS(status) << " (1: it saw its parent's thread)";

  EXPECT_TRUE(PortResyncRunning()) << "the parent's, untouched";
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  EXPECT_FALSE(PortResyncRunning()) << "stopped and joined with the last";
  EXPECT_EQ(rdma_destroy_id(specific), 0);
  AllowPortResyncThreadForTesting(false);
  SetPortResyncPeriodForTesting(0);
}

// The drop-in starts with port 1 alone; port 2 (10.0.0.2) is a device added
// after the program's wildcard bind or listen, as `rdma link add` would: the
// kernel puts every wildcard listener on the new device (cma_add_one:
// cma_listen_on_dev), and a wildcard bind holds its port there too (the bind
// list, cma_ps, is the host's). The drop-in's uscm-ports thread lists the
// ports again once a second while a wildcard id exists; here the test runs
// its steps (RunPortResyncForTesting; the ports' clock is the test's).
int64_t g_now_ns = 0;
int64_t FakeNow() { return g_now_ns; }

class WildcardPortAddedLaterTest : public WildcardPortsTest {
 protected:
  int PortsAtStart() const override { return 1; }
  void SetUp() override {
    WildcardPortsTest::SetUp();
    g_now_ns = 10'000'000'000;
    SetPortQueryForTesting(nullptr, FakeNow);
  }
};

TEST_F(WildcardPortAddedLaterTest, AWildcardListenerListensOnAPortAddedLater) {
  rdma_cm_id* id = NewId(false);
  ASSERT_EQ(Bind(id, 7003), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
  rdma_cm_id* bound = NewId(false);  // on 10.0.0.1 alone: stays there
  sockaddr_in one = Ipv4("10.0.0.1", 7004);
  ASSERT_EQ(rdma_bind_addr(bound, reinterpret_cast<sockaddr*>(&one)), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(bound, 4), 0) << strerror(errno);
  EXPECT_EQ(Claims(1), 0u);
  RunPortResyncForTesting();  // nothing new

  ASSERT_EQ(AddDeviceForTesting(handles_[1], {V4("10.0.0.2")}), 0) << strerror(errno);
  EXPECT_EQ(Claims(1), 0u);
  RunPortResyncForTesting();
  EXPECT_EQ(Claims(1), 2u) << "the wildcard listener's bind and listen on the new port";
  g_now_ns += 1'000'000'000;
  RunPortResyncForTesting();
  EXPECT_EQ(Claims(1), 2u) << "once";
  EXPECT_EQ(Claims(0), 4u) << "both listeners on port 1, as before";

  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(rdma_destroy_id(bound), 0);
  EXPECT_EQ(Claims(0), 0u);
  EXPECT_EQ(Claims(1), 0u);
}

TEST_F(WildcardPortAddedLaterTest, ANewPortThatRefusesTheListenIsLeftOut) {
  CmId* theirs = OtherBinds("10.0.0.2:7005", false);
  rdma_cm_id* id = NewId(false);
  ASSERT_EQ(Bind(id, 7005), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
  ASSERT_EQ(AddDeviceForTesting(handles_[1], {V4("10.0.0.2")}), 0) << strerror(errno);
  RunPortResyncForTesting();
  EXPECT_EQ(Claims(1), 1u) << "the other process's alone";
  EXPECT_EQ(Claims(0), 2u) << "still listening on port 1";
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(Claims(0), 0u);
  ASSERT_TRUE(other_ch_->DestroyId(theirs).ok());
}

// A wildcard bind that does not listen holds its port on a device added
// later, as the kernel's host-wide bind list does: another process cannot
// bind the port there, and the id's rdma_listen then listens there too.
TEST_F(WildcardPortAddedLaterTest, AWildcardBindHoldsItsPortOnAPortAddedLater) {
  rdma_cm_id* id = NewId(false);
  ASSERT_EQ(Bind(id, 7008), 0) << strerror(errno);
  ASSERT_EQ(AddDeviceForTesting(handles_[1], {V4("10.0.0.2")}), 0) << strerror(errno);
  RunPortResyncForTesting();
  EXPECT_EQ(Claims(1), 1u) << "the wildcard bind's claim on the new port";
  CmId* theirs = *other_ch_->CreateId(nullptr, PortSpace::kTcp);
  absl::Status s = theirs->BindAddr(*Address::Parse("10.0.0.2:7008"));
  EXPECT_FALSE(s.ok()) << "another process bound 10.0.0.2:7008 under our 0.0.0.0:7008";
  ASSERT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
  EXPECT_EQ(Claims(1), 2u) << "and its listen";
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(Claims(1), 0u);
  EXPECT_TRUE(theirs->BindAddr(*Address::Parse("10.0.0.2:7008")).ok()) << "free once destroyed";
  ASSERT_TRUE(other_ch_->DestroyId(theirs).ok());
}

// The new port's open (a uscmd start: up to 10 s) runs without the library's
// lock: a call of the program completes while it is under way. The open is
// a fake that waits until the test lets it go; the call's wait is bounded
// (20 s) so that the old path, which held the lock, fails instead of hanging.
std::mutex g_open_mu;
std::condition_variable g_open_cv;
bool g_open_entered = false;
bool g_open_released = false;
uscm_device* g_open_dev = nullptr;
uscm_device* BlockingOpen(ibv_context*, int) {
  std::unique_lock<std::mutex> lock(g_open_mu);
  g_open_entered = true;
  g_open_cv.notify_all();
  g_open_cv.wait(lock, [] { return g_open_released; });
  return g_open_dev;
}

TEST_F(WildcardPortAddedLaterTest, ACallCompletesWhileAPortAddedLaterOpens) {
  g_open_entered = g_open_released = false;
  g_open_dev = handles_[1];
  SetPortDevicesForTesting(BlockingOpen, nullptr);
  rdma_cm_id* listener = NewId(false);
  ASSERT_EQ(Bind(listener, 7009), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);
  ASSERT_EQ(AddUnopenedDeviceForTesting({V4("10.0.0.2")}), 0) << strerror(errno);
  g_now_ns += 1'000'000'000;

  std::thread resync([] { RunPortResyncForTesting(); });
  bool entered;
  {
    std::unique_lock<std::mutex> lock(g_open_mu);
    entered = g_open_cv.wait_for(lock, std::chrono::seconds(20), [] { return g_open_entered; });
  }
  std::future<int> call = std::async(std::launch::async, [this] {
    rdma_cm_id* other = NewId(false);
    sockaddr_in one = Ipv4("10.0.0.1", 7010);
    const int rc = rdma_bind_addr(other, reinterpret_cast<sockaddr*>(&one));
    rdma_destroy_id(other);
    return rc;
  });
  const bool completed = call.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(g_open_mu);
    g_open_released = true;
  }
  g_open_cv.notify_all();
  resync.join();
  EXPECT_TRUE(entered) << "the step never opened the new port";
  EXPECT_TRUE(completed) << "rdma_create_id / rdma_bind_addr waited for the new port's open";
  EXPECT_EQ(call.get(), 0) << strerror(errno);
  EXPECT_EQ(Claims(1), 2u) << "the listener on the new port once it opened";
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  EXPECT_EQ(Claims(1), 0u);
  SetPortDevicesForTesting(nullptr, nullptr);
}

// The uscm-ports thread lists the ports at once when a uevent says a verbs
// device was added, not at its period's end (an hour here): the test's
// socket stands in for the kernel's uevent socket. Another uevent (a netdev)
// wakes it without a step; the verbs device's add makes one.
using namespace std::string_literals;

TEST_F(WildcardPortAddedLaterTest, AUeventOfAVerbsDeviceListsThePortsAtOnce) {
  const TestUevents uevents;
  ASSERT_TRUE(uevents.ok()) << strerror(errno);
  AllowPortResyncThreadForTesting(true);
  rdma_cm_id* id = NewId(false);
  ASSERT_EQ(Bind(id, 7015), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
  ASSERT_TRUE(PortResyncRunning());
  ASSERT_EQ(AddDeviceForTesting(handles_[1], {V4("10.0.0.2")}), 0) << strerror(errno);
  const uint64_t steps = PortResyncSteps();
  const std::string netdev =
      "add@/devices/virtual/net/veth9\0ACTION=add\0DEVPATH=/devices/virtual/net/veth9\0"
      "SUBSYSTEM=net\0"s;
  ASSERT_TRUE(uevents.Send(netdev)) << strerror(errno);
  const std::string uverbs =
      "add@/devices/virtual/infiniband_verbs/uverbs1\0ACTION=add\0"
      "DEVPATH=/devices/virtual/infiniband_verbs/uverbs1\0"
      "SUBSYSTEM=infiniband_verbs\0"s;
  ASSERT_TRUE(uevents.Send(uverbs)) << strerror(errno);
  // Bounded (20 s), not timed: without the uevent the step comes in an hour.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (PortResyncSteps() == steps && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(PortResyncSteps(), steps + 1) << "one step, for the verbs device's add alone";
  EXPECT_EQ(Claims(1), 2u) << "the listener's bind and listen on the new port";
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_FALSE(PortResyncRunning());
  AllowPortResyncThreadForTesting(false);
}

}  // namespace
}  // namespace uscm::librdmacm
