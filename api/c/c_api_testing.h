// The C API (api/c/uscm_cma.h) on the simulated two-host fabric
// (api/rdma_cm/rdma_cm_testing.h): what the C API tests share. Host 1 serves at
// 10.0.0.2:7471 (`server_`); events are awaited in virtual time through the
// channel's pollable fd, as a C program would.
#ifndef USCM_API_C_C_API_TESTING_H_
#define USCM_API_C_C_API_TESTING_H_

#include <errno.h>
#include <poll.h>
#include <string.h>

#include <cstdint>
#include <memory>
#include <string>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/time.h"

namespace uscm::testing {

class CApiSimTest : public ::testing::Test {
 protected:
  // Call from SetUp: the fabric, both hosts' device handles and `server_`.
  void StartFabric(uint64_t seed) {
    auto f = SimFabric::Create(seed);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    for (int h = 0; h < 2; ++h) dev_[h] = uscm_device_wrap(fabric_->host(h).device.get());
    ASSERT_EQ(uscm_parse_addr("10.0.0.2:7471", &server_), 0);
  }
  // Subclasses destroy their channels first, then call this.
  void TearDown() override {
    for (uscm_device* d : dev_) uscm_device_unwrap_free(d);
  }

  Device& Dev(int host) { return *fabric_->host(host).device; }

  // An event is queued on `ch` (its fd polls readable).
  static bool Readable(uscm_event_channel* ch) {
    pollfd p{ch->fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  bool RunUntilEvent(uscm_event_channel* ch, int ms) {
    sim::Scheduler& s = fabric_->scheduler();
    return s.RunUntil([ch] { return Readable(ch); }, s.Now() + mad::Duration::Millis(ms)).ok();
  }
  // The next event on `ch` (must be `want`); the caller acks.
  uscm_cm_event* NextOn(uscm_event_channel* ch, uscm_cm_event_type want) {
    uscm_cm_event* e = nullptr;
    EXPECT_TRUE(RunUntilEvent(ch, 120000)) << "no " << uscm_event_str(want);
    EXPECT_EQ(uscm_get_cm_event(ch, &e), 0) << uscm_last_error();
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << uscm_event_str(e->event);
    }
    return e;
  }
  void AckOn(uscm_event_channel* ch, uscm_cm_event_type want) {
    uscm_cm_event* e = NextOn(ch, want);
    if (e != nullptr) {
      EXPECT_EQ(uscm_ack_cm_event(e), 0);
    }
  }
  // -1, errno and the start of uscm_last_error().
  static void ExpectError(int rc, int err, const std::string& message) {
    const int e = errno;
    EXPECT_EQ(rc, -1);
    EXPECT_EQ(e, err) << strerror(e) << ": " << uscm_last_error();
    EXPECT_EQ(std::string(uscm_last_error()).substr(0, message.size()), message);
  }
  // Past TimeWait: no id, connection, listener, table entry or timer left.
  void ExpectNoCmState() {
    fabric_->RunFor(mad::Duration::Seconds(300));
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(Dev(h).id_count(), 0u) << "host " << h;
      EXPECT_EQ(Dev(h).node().cm().connection_count(), 0u) << "host " << h;
      EXPECT_EQ(Dev(h).node().cm().listener_count(), 0u) << "host " << h;
      EXPECT_EQ(Dev(h).node().cm().table_entries(), 0u) << "host " << h;
      EXPECT_TRUE(Dev(h).node().cm().timers_empty()) << "host " << h;
    }
  }

  std::unique_ptr<SimFabric> fabric_;
  uscm_device* dev_[2] = {nullptr, nullptr};
  uscm_addr server_{};
};

// The fabric with one channel on host 0 (`ch_`), for tests of one program.
class CApiOneChannelTest : public CApiSimTest {
 protected:
  void SetUp() override {
    StartFabric(/*seed=*/31);
    ch_ = uscm_create_event_channel_on(dev_[0]);
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    uscm_destroy_event_channel(ch_);
    CApiSimTest::TearDown();
  }
  uscm_event_channel* ch_ = nullptr;
};

}  // namespace uscm::testing

#endif  // USCM_API_C_C_API_TESTING_H_
