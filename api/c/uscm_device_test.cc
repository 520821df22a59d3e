// uscm_device_open / uscm_device_close without an RDMA device (this is what a
// user meets on a machine without hardware; the open path over a port is the
// same OpenOwnerOrRouter + Device::Create the tools use, tested there).
#include "api/c/uscm_device.h"

#include <errno.h>

#include <string>

#include "api/c/uscm_device_on.h"
#include "api/c/uscm_sim_c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

// A CA name no machine has: the error path runs everywhere.
TEST(UscmDeviceTest, OpenOfAnUnknownCaSaysWhatToDo) {
  errno = 0;
  EXPECT_EQ(uscm_device_open("uscm_no_such_ca", 2), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_THAT(uscm_last_error(), HasSubstr("device_open: no RDMA port uscm_no_such_ca:2"));
  EXPECT_THAT(uscm_last_error(), HasSubstr("simulated fabric"));
}

// NULL, 0 means the first ACTIVE port: with no RDMA device at all (this
// machine, CI) the message names that case; on an IB or RoCE port the open
// succeeds and the device closes again (RoCE is run in the VM lane,
// tests/vm/groups/60-dropin-rping.sh).
TEST(UscmDeviceTest, OpenOfTheFirstActivePort) {
  errno = 0;
  uscm_device* d = uscm_device_open(nullptr, 0);
  if (d == nullptr) {
    EXPECT_EQ(errno, ENODEV) << uscm_last_error();
    EXPECT_THAT(uscm_last_error(), HasSubstr("device_open: no RDMA port (first active):0"));
  } else {
    EXPECT_EQ(uscm_device_close(d), 0) << uscm_last_error();
  }
}

TEST(UscmDeviceTest, AddNeighborNeedsAnOpenedDevice) {
  uscm_addr ip = {};
  ip.family = USCM_AF_INET;
  const uint8_t gid[16] = {0xfe, 0x80};
  errno = 0;
  EXPECT_EQ(uscm_device_add_neighbor(nullptr, &ip, gid), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_THAT(uscm_last_error(), HasSubstr("unknown device"));
  ip.family = USCM_AF_IB;
  EXPECT_EQ(uscm_device_add_neighbor(nullptr, &ip, gid), -1);
  EXPECT_THAT(uscm_last_error(), HasSubstr("IPv4 / IPv6"));
}

TEST(UscmDeviceTest, CloseRefusesWhatItDidNotOpen) {
  errno = 0;
  EXPECT_EQ(uscm_device_close(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_THAT(uscm_last_error(), HasSubstr("device_close: unknown device"));
  int not_a_device = 0;
  EXPECT_EQ(uscm_device_close(reinterpret_cast<uscm_device*>(&not_a_device)), -1);
  EXPECT_EQ(errno, EINVAL);
}

// A device with no id on it: no DEVICE_REMOVAL tells of its lost MAD path,
// the call does (host 0 of the simulated fabric; host 1's stays).
TEST(UscmDeviceTest, TransportLostSaysWhyOnceThePathIsLost) {
  uscm_sim* sim = uscm_sim_create(3);
  ASSERT_NE(sim, nullptr);
  uscm_device* dev = uscm_sim_device(sim, 0);
  char why[16] = "unchanged";
  EXPECT_EQ(uscm_device_transport_lost(dev, why, sizeof why), 0);
  EXPECT_STREQ(why, "unchanged");
  ASSERT_EQ(uscm_sim_lose_transport(sim, 0, "uscmd rxe0:1 exited (the socket closed)"), 0);
  EXPECT_EQ(uscm_device_transport_lost(dev, why, sizeof why), 1);
  EXPECT_STREQ(why, "uscmd rxe0:1 ex") << "cut to 15 bytes and the NUL";
  EXPECT_EQ(uscm_device_transport_lost(dev, nullptr, 0), 1);
  EXPECT_EQ(uscm_device_transport_lost(uscm_sim_device(sim, 1), nullptr, 0), 0);
  errno = 0;
  EXPECT_EQ(uscm_device_transport_lost(nullptr, why, sizeof why), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_THAT(uscm_last_error(), HasSubstr("device_transport_lost: NULL device"));
  uscm_sim_destroy(sim);
}

}  // namespace

// The drop-in's open on its own context: without one there is nothing to read
// the port on (the open over a RoCE port: tests/vm/groups/6*-dropin-*).
TEST(UscmDeviceTest, OpenOnNoContextIsInvalid) {
  errno = 0;
  EXPECT_EQ(uscm::c_api::OpenDeviceOn(nullptr, 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_THAT(uscm_last_error(), HasSubstr("device_open: no device context"));
}
