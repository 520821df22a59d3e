// The fixture of the tests that look at one device's calls without a peer
// (RoCE resolve and multicast, neighbour resolution): a fresh SimFabric and a
// Device with the test's own options on host 1's QP1, and its event channel.
#ifndef USCM_API_RDMA_CM_ONE_DEVICE_FIXTURE_H_
#define USCM_API_RDMA_CM_ONE_DEVICE_FIXTURE_H_

#include <memory>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm::testing {

class OneDeviceTest : public ::testing::Test {
 protected:
  // Call with ASSERT_NO_FATAL_FAILURE.
  void Open(uint64_t seed, const DeviceOptions& options) {
    auto f = SimFabric::Create(seed);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
    auto dev = Device::CreateSimulated(f_->scheduler(), Under(*f_->host(0).qp1),
                                       [] { return false; }, options);
    ASSERT_TRUE(dev.ok()) << dev.status();
    dev_ = std::move(*dev);
    auto ch = dev_->CreateEventChannel();
    ASSERT_TRUE(ch.ok()) << ch.status();
    ch_ = std::move(*ch);
  }
  // The transport the device sends through: host 1's QP1, or a test's
  // wrapper of it (kept by the derived fixture).
  virtual mad::Transport& Under(mad::Transport& qp1) { return qp1; }
  // Before the derived fixture's members go: the device's threads may call
  // back into them (DeviceOptions::resolve_neighbour).
  void TearDown() override {
    ch_.reset();
    dev_.reset();
  }

  // The channel's next queued event (no simulation step), acked.
  Event Next() {
    absl::StatusOr<Event*> e = ch_->GetEvent();
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return Event{};
    Event copy = **e;
    EXPECT_TRUE(ch_->AckEvent(*e).ok());
    return copy;
  }
  Event Next(EventType want) {
    Event e = Next();
    EXPECT_EQ(e.event, want) << EventTypeName(e.event) << " " << e.detail;
    return e;
  }

  std::unique_ptr<SimFabric> f_;
  std::unique_ptr<Device> dev_;
  std::unique_ptr<EventChannel> ch_;
};

}  // namespace uscm::testing

#endif  // USCM_API_RDMA_CM_ONE_DEVICE_FIXTURE_H_
