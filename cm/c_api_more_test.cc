// More of the C API (cm/uscm_cma.h) on the simulated two-host fabric:
// uscm_migrate_id (rdma_migrate_id) with its misuse errors. Every test ends
// with every table empty.
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cm/rdma_cm.h"
#include "cm/rdma_cm_testing.h"
#include "cm/uscm_cma.h"
#include "gtest/gtest.h"
#include "mad/time.h"

namespace uscm {
namespace {

class CApiMoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = testing::SimFabric::Create(/*seed=*/29);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    for (int h = 0; h < 2; ++h) dev_[h] = uscm_device_wrap(fabric_->host(h).device.get());
    for (int i = 0; i < 4; ++i) {
      ch_[i] = uscm_create_event_channel_on(dev_[i % 2]);  // 0, 2: host 0; 1, 3: host 1
      ASSERT_NE(ch_[i], nullptr);
    }
    ASSERT_EQ(uscm_parse_addr("10.0.0.2:7471", &server_), 0);
  }
  void TearDown() override {
    for (uscm_event_channel* c : ch_) uscm_destroy_event_channel(c);
    for (uscm_device* d : dev_) uscm_device_unwrap_free(d);
  }

  Device& Dev(int host) { return *fabric_->host(host).device; }

  static bool Readable(uscm_event_channel* ch) {
    pollfd p{ch->fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  bool RunUntilEvent(uscm_event_channel* ch, int ms) {
    sim::Scheduler& s = fabric_->scheduler();
    return s.RunUntil([ch] { return Readable(ch); }, s.Now() + mad::Duration::Millis(ms)).ok();
  }
  // The next event on channel c (must be `want`); the caller acks.
  uscm_cm_event* Next(uscm_event_channel* c, uscm_cm_event_type want) {
    uscm_cm_event* e = nullptr;
    EXPECT_TRUE(RunUntilEvent(c, 120000)) << "no " << uscm_event_str(want);
    EXPECT_EQ(uscm_get_cm_event(c, &e), 0) << uscm_last_error();
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << uscm_event_str(e->event);
    }
    return e;
  }
  void Ack(uscm_event_channel* c, uscm_cm_event_type want) {
    uscm_cm_event* e = Next(c, want);
    if (e != nullptr) {
      EXPECT_EQ(uscm_ack_cm_event(e), 0);
    }
  }
  void ExpectQuiet(int ms = 200) {
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(RunUntilEvent(ch_[i], ms)) << "event on channel " << i;
  }
  static void ExpectError(int rc, int err, const std::string& message) {
    const int e = errno;
    EXPECT_EQ(rc, -1);
    EXPECT_EQ(e, err) << strerror(e) << ": " << uscm_last_error();
    EXPECT_EQ(std::string(uscm_last_error()).substr(0, message.size()), message);
  }

  void ExpectAllEmpty() {
    fabric_->RunFor(mad::Duration::Seconds(300));  // past TimeWait
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(Dev(h).id_count(), 0u) << "host " << h;
      EXPECT_EQ(Dev(h).node().cm().connection_count(), 0u) << "host " << h;
      EXPECT_EQ(Dev(h).node().cm().listener_count(), 0u) << "host " << h;
      EXPECT_EQ(Dev(h).node().cm().table_entries(), 0u) << "host " << h;
      EXPECT_TRUE(Dev(h).node().cm().timers_empty()) << "host " << h;
    }
  }

  std::unique_ptr<testing::SimFabric> fabric_;
  uscm_device* dev_[2] = {nullptr, nullptr};
  uscm_event_channel* ch_[4] = {nullptr, nullptr, nullptr, nullptr};
  uscm_addr server_{};
};

// An event queued on the old channel moves with the id; later events go to
// the new channel only; id->channel follows. Misuse: NULL id, NULL channel
// (synchronous mode: ENOTSUP), a channel of the other host, retrieved events
// not acked (EBUSY until the ack).
TEST_F(CApiMoreTest, MigrateMovesQueuedAndFutureEventsAndRefusesWhileUnacked) {
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
  ExpectError(uscm_migrate_id(nullptr, ch_[2]), EINVAL, "migrate_id: id is NULL");
  ExpectError(uscm_migrate_id(id, nullptr), ENOTSUP, "migrate_id: NULL channel");
  ExpectError(uscm_migrate_id(id, ch_[1]), EINVAL,
              "migrate_id: the channel belongs to another device");
  EXPECT_EQ(id->channel, ch_[0]);
  ASSERT_EQ(uscm_migrate_id(id, ch_[0]), 0) << "same channel: nothing to do";

  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  ASSERT_TRUE(RunUntilEvent(ch_[0], 1000));
  ASSERT_EQ(uscm_migrate_id(id, ch_[2]), 0) << uscm_last_error();
  EXPECT_EQ(id->channel, ch_[2]);
  EXPECT_FALSE(Readable(ch_[0])) << "the queued ADDR_RESOLVED left the old channel";
  uscm_cm_event* e = nullptr;
  ExpectError(uscm_get_cm_event(ch_[0], &e), EAGAIN, "get_cm_event: no event queued");
  uscm_cm_event* resolved = Next(ch_[2], USCM_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->id, id);

  ExpectError(uscm_migrate_id(id, ch_[0]), EBUSY,
              "migrate_id: 1 retrieved event(s) of this id are not acked");
  EXPECT_EQ(id->channel, ch_[2]);
  ASSERT_EQ(uscm_ack_cm_event(resolved), 0);
  ASSERT_EQ(uscm_migrate_id(id, ch_[0]), 0) << uscm_last_error();
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ROUTE_RESOLVED);
  ExpectQuiet();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  ExpectError(uscm_migrate_id(id, ch_[2]), EINVAL, "migrate_id: unknown id");
  ExpectAllEmpty();
}

// A listener migrated with a CONNECT_REQUEST queued: the request (and its new
// id) are retrieved from the new channel, the new id's channel is the new one
// and its ESTABLISHED arrives there; the active id is migrated mid-connect.
TEST_F(CApiMoreTest, MigratedListenerTakesItsQueuedConnectRequests) {
  uscm_cm_id* l = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[1], &l, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_bind_addr(l, &server_), 0) << uscm_last_error();
  ASSERT_EQ(uscm_listen(l, 4), 0) << uscm_last_error();
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ROUTE_RESOLVED);
  uscm_conn_param cp{};
  cp.qp_num = 0x111;
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  ASSERT_EQ(uscm_migrate_id(id, ch_[2]), 0) << uscm_last_error();

  ASSERT_TRUE(RunUntilEvent(ch_[1], 120000));
  ASSERT_EQ(uscm_migrate_id(l, ch_[3]), 0) << uscm_last_error();
  EXPECT_FALSE(Readable(ch_[1]));
  uscm_cm_event* req = Next(ch_[3], USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->listen_id, l);
  uscm_cm_id* child = req->id;
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->channel, ch_[3]);
  ExpectError(uscm_migrate_id(child, ch_[1]), EBUSY, "migrate_id: 1 retrieved event(s)");
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  cp.qp_num = 0x222;
  ASSERT_EQ(uscm_accept(child, &cp), 0) << uscm_last_error();
  Ack(ch_[2], USCM_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_EQ(uscm_establish(id), 0) << uscm_last_error();
  Ack(ch_[3], USCM_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(uscm_disconnect(id), 0) << uscm_last_error();
  Ack(ch_[3], USCM_CM_EVENT_DISCONNECTED);
  Ack(ch_[2], USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_disconnect(child), 0) << uscm_last_error();
  ExpectQuiet();
  ASSERT_EQ(uscm_destroy_id(child), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(l), 0) << uscm_last_error();
  ExpectAllEmpty();
}

}  // namespace
}  // namespace uscm
