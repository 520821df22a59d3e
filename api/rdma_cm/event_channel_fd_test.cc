// EventChannel's fd is readable exactly while events are queued, whatever
// moves them: bursts (one eventfd write per empty -> non-empty transition),
// GetEvent draining the queue, DestroyId dropping queued events, Migrate
// moving them to another channel; and from the moment it is made (the first
// fd() call), whatever was queued before. ADDR_RESOLVED is queued by ResolveAddr
// itself, so no simulated time needs to run.
#include <poll.h>

#include <vector>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

bool Readable(const EventChannel& ch) {
  pollfd p{ch.fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

class EventChannelFdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = testing::SimFabric::Create(/*seed=*/5);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
  }
  EventChannel& ch() { return *f_->host(0).channel; }
  // A new id on `channel` with its ADDR_RESOLVED queued.
  CmId* Resolved(EventChannel& channel) {
    CmId* id = *channel.CreateId(nullptr, PortSpace::kTcp);
    Address dst = f_->host(1).ip;
    dst.port = 7471;
    EXPECT_TRUE(id->ResolveAddr(absl::nullopt, dst).ok());
    return id;
  }
  void GetAndAck(EventChannel& channel) {
    absl::StatusOr<Event*> e = channel.GetEvent();
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_TRUE(channel.AckEvent(*e).ok());
  }

  std::unique_ptr<testing::SimFabric> f_;
};

TEST_F(EventChannelFdTest, ReadableUntilTheLastOfABurstIsRetrieved) {
  EXPECT_FALSE(Readable(ch()));
  std::vector<CmId*> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Resolved(ch()));
  ASSERT_EQ(ch().queued(), 3u);
  for (int left = 3; left > 0; --left) {
    EXPECT_TRUE(Readable(ch())) << left << " queued";
    GetAndAck(ch());
  }
  EXPECT_FALSE(Readable(ch()));
  EXPECT_EQ(ch().GetEvent().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(Readable(ch()));
  // Empty -> non-empty again: readable again.
  CmId* again = Resolved(ch());
  EXPECT_TRUE(Readable(ch()));
  GetAndAck(ch());
  EXPECT_FALSE(Readable(ch()));
  for (CmId* id : ids) ASSERT_TRUE(ch().DestroyId(id).ok());
  ASSERT_TRUE(ch().DestroyId(again).ok());
}

TEST_F(EventChannelFdTest, DestroyingTheIdsOfQueuedEventsClearsTheFd) {
  CmId* a = Resolved(ch());
  CmId* b = Resolved(ch());
  ASSERT_TRUE(ch().DestroyId(a).ok());
  EXPECT_EQ(ch().queued(), 1u);
  EXPECT_TRUE(Readable(ch()));
  ASSERT_TRUE(ch().DestroyId(b).ok());
  EXPECT_EQ(ch().queued(), 0u);
  EXPECT_FALSE(Readable(ch()));
}

TEST_F(EventChannelFdTest, MigrateMovesReadability) {
  auto other = f_->host(0).device->CreateEventChannel();
  ASSERT_TRUE(other.ok()) << other.status();
  CmId* a = Resolved(ch());
  CmId* b = Resolved(ch());
  ASSERT_TRUE(a->Migrate(other->get()).ok());
  EXPECT_TRUE(Readable(ch()));  // b's event stays
  EXPECT_TRUE(Readable(**other));
  ASSERT_TRUE(b->Migrate(other->get()).ok());
  EXPECT_FALSE(Readable(ch()));
  EXPECT_EQ((*other)->queued(), 2u);
  GetAndAck(**other);
  EXPECT_TRUE(Readable(**other));
  GetAndAck(**other);
  EXPECT_FALSE(Readable(**other));
  ASSERT_TRUE((*other)->DestroyId(a).ok());
  ASSERT_TRUE((*other)->DestroyId(b).ok());
}

// A channel's fd is made when first asked for (EventChannel::fd): events
// queued before that make it readable from the moment it is handed out, and
// until then the channel made no eventfd syscall.
TEST_F(EventChannelFdTest, FdAskedForAfterEventsQueuedIsReadableAtOnce) {
  auto late = f_->host(0).device->CreateEventChannel();
  ASSERT_TRUE(late.ok()) << late.status();
  EventChannel& ch = **late;
  CmId* a = Resolved(ch);
  CmId* b = Resolved(ch);
  GetAndAck(ch);
  GetAndAck(ch);
  CmId* c = Resolved(ch);
  EXPECT_EQ(ch.fd_syscalls(), 0u) << "no fd asked for: no syscall per event";
  const int fd = ch.fd();
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(Readable(ch)) << "c's event was queued before the fd existed";
  EXPECT_EQ(ch.fd(), fd) << "the same fd every time";
  GetAndAck(ch);
  EXPECT_FALSE(Readable(ch));
  EXPECT_EQ(ch.fd_syscalls(), 2u);  // written when made, read when drained
  for (CmId* id : {a, b, c}) ASSERT_TRUE(ch.DestroyId(id).ok());
}

TEST_F(EventChannelFdTest, FdAskedForOnAnEmptyQueueIsNotReadable) {
  auto late = f_->host(0).device->CreateEventChannel();
  ASSERT_TRUE(late.ok()) << late.status();
  EventChannel& ch = **late;
  CmId* a = Resolved(ch);
  GetAndAck(ch);
  ASSERT_GE(ch.fd(), 0);
  EXPECT_FALSE(Readable(ch));
  CmId* b = Resolved(ch);
  EXPECT_TRUE(Readable(ch));
  GetAndAck(ch);
  EXPECT_FALSE(Readable(ch));
  for (CmId* id : {a, b}) ASSERT_TRUE(ch.DestroyId(id).ok());
}

// An acked event is kept and handed out again for the next one (no
// allocation per event), blank: nothing a program wrote into it, nor what
// the last event carried, leaks into the next.
TEST_F(EventChannelFdTest, AnAckedEventComesBackBlank) {
  CmId* a = Resolved(ch());
  absl::StatusOr<Event*> first = ch().GetEvent();
  ASSERT_TRUE(first.ok()) << first.status();
  Event* e = *first;
  e->status = 5;
  e->listen_id = a;
  e->conn.private_data = {1, 2, 3};
  e->conn.qp_num = 9;
  e->ud.private_data = {4};
  e->ud.qkey = 7;
  e->mc_context = a;
  e->detail = "what went wrong";
  ASSERT_TRUE(ch().AckEvent(e).ok());

  CmId* b = Resolved(ch());
  absl::StatusOr<Event*> second = ch().GetEvent();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, e) << "the acked event was not reused";
  const Event& r = **second;
  EXPECT_EQ(r.event, EventType::kAddrResolved);
  EXPECT_EQ(r.id, b);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.listen_id, nullptr);
  EXPECT_TRUE(r.conn.private_data.empty());
  EXPECT_EQ(r.conn.qp_num, 0u);
  EXPECT_EQ(r.conn.flow_control, 1);
  EXPECT_TRUE(r.ud.private_data.empty());
  EXPECT_EQ(r.ud.qkey, 0u);
  EXPECT_EQ(r.mc_context, nullptr);
  EXPECT_TRUE(r.detail.empty());
  ASSERT_TRUE(ch().AckEvent(*second).ok());
  ASSERT_TRUE(ch().DestroyId(a).ok());
  ASSERT_TRUE(ch().DestroyId(b).ok());
}

}  // namespace
}  // namespace uscm
