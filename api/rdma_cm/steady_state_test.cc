// A connection through the C++ API once the layer is warm, with events taken
// as a C++ user takes them (GetEvent, read, AckEvent: the channel recycles
// them with their buffers): the heap allocations the API layer makes for it
// (counted by alloc_counter's operator new, inside the API
// calls and the devices' OnProgress only: the simulator's debug checks
// allocate), and that reused buffers carry each event's and each request's
// own bytes.
#include <cstdio>
#include <vector>

#include "api/rdma_cm/alloc_counter.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

using testing::Counted;
using testing::SimFabric;

std::vector<uint8_t> Fill(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i);
  return v;
}

// `head` followed by zeros up to `n` bytes: a private data field on the wire.
std::vector<uint8_t> Padded(std::vector<uint8_t> head, size_t n) {
  head.resize(n, 0);
  return head;
}

// Between a node and its Device: what the device does after each step
// (turning CM events into rdma_cm events) is counted.
class CountingObserver : public cm::NodeObserver {
 public:
  explicit CountingObserver(Device* d) : device_(d) {}
  void OnProgress(mad::TimePoint now) override {
    Counted([&] { device_->OnProgress(now); });
  }

 private:
  Device* device_;
};

class SteadyStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cm::NodeOptions node;
    node.cm.timewait = mad::Duration::Millis(1);  // records freed as virtual time goes on
    auto f = SimFabric::Create(/*seed=*/5, nullptr, node);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
    for (int h = 0; h < 2; ++h) {
      observers_.push_back(std::make_unique<CountingObserver>(f_->host(h).device.get()));
      f_->host(h).device->node().set_observer(observers_.back().get());
    }
    listener_ = *ch(1).CreateId(nullptr, PortSpace::kTcp);
    Address a = f_->host(1).ip;
    a.port = 7471;
    ASSERT_TRUE(listener_->BindAddr(a).ok());
    ASSERT_TRUE(listener_->Listen(1 << 20).ok());
    dst_ = a;
  }

  EventChannel& ch(int h) { return *f_->host(h).channel; }

  // Runs to host h's next event, checks it is `want`, lets `look` read it,
  // acks it (it goes back to the channel for reuse). Returns its id.
  template <typename Look>
  CmId* Take(int h, EventType want, Look look) {
    sim::Scheduler& s = f_->scheduler();
    EventChannel* c = &ch(h);
    EXPECT_TRUE(s.RunUntil([c] { return c->queued() > 0; }, s.Now() + mad::Duration::Seconds(60))
                    .ok());
    absl::StatusOr<Event*> e = Counted([c] { return c->GetEvent(); });
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return nullptr;
    EXPECT_EQ((*e)->event, want) << EventTypeName((*e)->event) << " " << (*e)->detail;
    look(**e);
    CmId* id = (*e)->id;
    EXPECT_TRUE(Counted([&] { return c->AckEvent(*e); }).ok());
    return id;
  }
  CmId* Take(int h, EventType want) {
    return Take(h, want, [](const Event&) {});
  }

  // One connection, established and torn down; `req_data` / `rep_data` the
  // user's private data of connect / accept, checked where they arrive.
  void OneConnection(uint32_t qpn, const std::vector<uint8_t>& req_data,
                     const std::vector<uint8_t>& rep_data) {
    const std::vector<uint8_t> req_field = Padded(req_data, kReqPrivateDataIp);
    const std::vector<uint8_t> rep_field = Padded(rep_data, kRepPrivateData);
    ConnParam cp;
    cp.qp_num = qpn;
    cp.private_data = req_data;
    ConnParam ap;
    ap.qp_num = qpn + 0x100000;
    ap.private_data = rep_data;
    CmId* a = *Counted([&] { return ch(0).CreateId(nullptr, PortSpace::kTcp); });
    ASSERT_TRUE(Counted([&] { return a->ResolveAddr(absl::nullopt, dst_); }).ok());
    Take(0, EventType::kAddrResolved);
    ASSERT_TRUE(Counted([&] { return a->ResolveRoute(); }).ok());
    Take(0, EventType::kRouteResolved);
    ASSERT_TRUE(Counted([&] { return a->Connect(cp); }).ok());
    CmId* b = Take(1, EventType::kConnectRequest,
                   [&](const Event& e) { EXPECT_EQ(e.conn.private_data, req_field); });
    ASSERT_NE(b, nullptr);
    ASSERT_TRUE(Counted([&] { return b->Accept(ap); }).ok());
    Take(0, EventType::kConnectResponse,
         [&](const Event& e) { EXPECT_EQ(e.conn.private_data, rep_field); });
    ASSERT_TRUE(Counted([&] { return a->Establish(); }).ok());
    Take(1, EventType::kEstablished,
         [](const Event& e) { EXPECT_TRUE(e.conn.private_data.empty()); });
    ASSERT_TRUE(Counted([&] { return a->Disconnect(); }).ok());
    Take(1, EventType::kDisconnected,
         [](const Event& e) { EXPECT_TRUE(e.conn.private_data.empty()); });
    ASSERT_TRUE(Counted([&] { return b->Disconnect(); }).ok());
    Take(0, EventType::kDisconnected);
    ASSERT_TRUE(Counted([&] { return ch(0).DestroyId(a); }).ok());
    ASSERT_TRUE(Counted([&] { return ch(1).DestroyId(b); }).ok());
  }

  void TearDown() override {
    for (int h = 0; h < 2; ++h) f_->host(h).device->node().set_observer(f_->host(h).device.get());
  }

  std::unique_ptr<SimFabric> f_;
  std::vector<std::unique_ptr<CountingObserver>> observers_;
  CmId* listener_ = nullptr;
  Address dst_;
};

// Each request's and each event's bytes are its own, though the REQ's
// buffer and the events' buffers are the previous ones reused: a longer
// private data first, then a shorter one, then none.
TEST_F(SteadyStateTest, ReusedBuffersCarryOnlyTheirOwnBytes) {
  ASSERT_NO_FATAL_FAILURE(OneConnection(1, Fill(kReqPrivateDataIp, 1), Fill(kRepPrivateData, 7)));
  ASSERT_NO_FATAL_FAILURE(OneConnection(2, Fill(3, 0x50), Fill(5, 0x60)));
  ASSERT_NO_FATAL_FAILURE(OneConnection(3, {}, {}));
}

// Retrieved events are found by a scan from the newest: any order of acks
// works, an event acked twice or never retrieved is refused.
TEST_F(SteadyStateTest, AcksInAnyOrderAndUnknownOnesRefused) {
  CmId* a = *ch(0).CreateId(nullptr, PortSpace::kTcp);
  CmId* b = *ch(0).CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(a->ResolveAddr(absl::nullopt, dst_).ok());
  ASSERT_TRUE(b->ResolveAddr(absl::nullopt, dst_).ok());
  absl::StatusOr<Event*> first = ch(0).GetEvent();
  absl::StatusOr<Event*> second = ch(0).GetEvent();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(ch(0).unacked(), 2u);
  Event stranger;
  EXPECT_TRUE(absl::IsNotFound(ch(0).AckEvent(&stranger)));
  EXPECT_TRUE(ch(0).AckEvent(*first).ok());  // the older one first
  EXPECT_TRUE(absl::IsNotFound(ch(0).AckEvent(*first)));
  EXPECT_EQ(ch(0).unacked(), 1u);
  EXPECT_TRUE(ch(0).AckEvent(*second).ok());
  EXPECT_TRUE(absl::IsNotFound(ch(0).AckEvent(*second)));
  EXPECT_EQ(ch(0).unacked(), 0u);
  EXPECT_TRUE(ch(0).DestroyId(a).ok());
  EXPECT_TRUE(ch(0).DestroyId(b).ok());
}

// Once warm, a connection (resolve addr and route from the path cache,
// connect, accept, establish, disconnect both ways, destroy) allocates the
// two CmIds and nothing else but, now and then, a node of a channel's
// queue. Before the events, the REQ's private data, the path cache hit and
// the ephemeral port's owner list were reused it was 9.6.
TEST_F(SteadyStateTest, AWarmConnectionAllocatesLittle) {
  for (uint32_t i = 0; i < 300; ++i) ASSERT_NO_FATAL_FAILURE(OneConnection(i + 1, {}, {}));
  constexpr int kConnections = 1000;
  const unsigned long long before = testing::Allocations();
  for (uint32_t i = 0; i < kConnections; ++i) {
    ASSERT_NO_FATAL_FAILURE(OneConnection(i + 1000, {}, {}));
  }
  const double per_connection = static_cast<double>(testing::Allocations() - before) / kConnections;
  printf("%.2f allocations per connection\n", per_connection);
  EXPECT_LE(per_connection, 2.25);
  EXPECT_GE(per_connection, 2.0) << "the connection's two CmIds are allocated: is the counter linked?";
}

}  // namespace
}  // namespace uscm
