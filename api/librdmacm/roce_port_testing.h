// The fixture of the direct-path tests (direct_addr_test, direct_route_test):
// the drop-in's one port is a RoCE device (192.168.78.1, and fe80::1 as
// rxe's GID 0 is the netdev's link-local address) on host 0 of a
// simulated fabric, with no kernel tables (the destination's GID is its IP,
// resolved within the call); each test has a non-blocking program channel
// that must be empty at its end.
#ifndef USCM_API_LIBRDMACM_ROCE_PORT_TESTING_H_
#define USCM_API_LIBRDMACM_ROCE_PORT_TESTING_H_

#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <cstdint>
#include <string>
#include <utility>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {

// A GID as inet_ntop writes an IPv6 address ("::ffff:192.168.78.2").
inline std::string GidText(const uint8_t raw[16]) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, raw, text, sizeof(text));
  return text;
}

class RocePortTest : public ::testing::Test {
 protected:
  // From a suite's SetUpTestSuite: the fabric of `seed`; the port's path MTU
  // is DeviceOptions' default, 1024 (IBV_MTU_1024).
  static void OpenPort(uint64_t seed) {
    auto f = testing::SimFabric::Create(seed);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f).release();
    DeviceOptions o;
    o.roce = true;
    o.local_ips = {*Address::Parse("fe80::1"), *Address::Parse("192.168.78.1")};
    auto dev = Device::CreateSimulated(fabric_->scheduler(), *fabric_->host(0).qp1,
                                       [] { return false; }, o);
    ASSERT_TRUE(dev.ok()) << dev.status();
    roce_ = std::move(*dev).release();
    dev_ = uscm_device_wrap(roce_);
    Addr16 link_local{}, ip{};
    inet_pton(AF_INET6, "fe80::1", link_local.data());
    ip[10] = ip[11] = 0xff;
    inet_pton(AF_INET, "192.168.78.1", &ip[12]);
    ASSERT_EQ(UseDevicesForTesting({dev_}, {{link_local, ip}}), 0) << strerror(errno);
  }
  static void TearDownTestSuite() {
    ResetBackendForTesting();
    uscm_device_unwrap_free(dev_);
    delete roce_;
    delete fabric_;
  }
  void SetUp() override {
    ch_ = NewNonBlockingChannel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override { DestroyDrainedChannel(ch_); }

  // The event already queued on `ch` (no pump, no fabric step).
  static rdma_cm_event* Take(rdma_event_channel* ch, rdma_cm_event_type want) {
    rdma_cm_event* e = nullptr;
    EXPECT_EQ(rdma_get_cm_event(ch, &e), 0) << strerror(errno);
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << rdma_event_str(e->event);
    }
    return e;
  }
  // The one event the call queued on `ch` itself (none on the port's own
  // uscm channel, the pump's way in), of type `want`, with the kernel's
  // fields: the id, no listen_id, status 0, param all zero (through the pump
  // it carried flow_control 1 and retry_count 7). Acked here.
  static void ExpectQueuedByTheCall(rdma_event_channel* ch, rdma_cm_event_type want,
                                    const rdma_cm_id* id) {
    EXPECT_EQ(uscm_event_channel_queued(PortChannelsForTesting()[0]), 0u)
        << "nothing for the pump: the event skipped the port's channel";
    ASSERT_EQ(QueuedEvents(ch), 1) << "queued by the call itself";
    rdma_cm_event* e = Take(ch, want);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id, id);
    EXPECT_EQ(e->listen_id, nullptr);
    EXPECT_EQ(e->status, 0);
    const rdma_conn_param zero = {};
    EXPECT_EQ(memcmp(&e->param.conn, &zero, sizeof(zero)), 0)
        << rdma_event_str(e->event) << " with parameters (flow_control "
        << int(e->param.conn.flow_control) << ", retry_count " << int(e->param.conn.retry_count)
        << ")";
    EXPECT_EQ(rdma_ack_cm_event(e), 0);
  }

  rdma_event_channel* ch_ = nullptr;

 private:
  static inline testing::SimFabric* fabric_ = nullptr;
  static inline Device* roce_ = nullptr;
  static inline uscm_device* dev_ = nullptr;
};

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_ROCE_PORT_TESTING_H_
