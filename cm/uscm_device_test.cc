// uscm_device_open / uscm_device_close without an RDMA device (this is what a
// user meets on a machine without hardware; the open path over a port is the
// same OpenOwnerOrRouter + Device::Create the tools use, tested there).
#include "cm/uscm_device.h"

#include <errno.h>
#include <sys/stat.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

bool HasRdmaDevice() {
  struct stat st;
  return stat("/sys/class/infiniband", &st) == 0 && st.st_nlink > 2;
}

TEST(UscmDeviceTest, OpenWithoutADeviceSaysWhatToDo) {
  if (HasRdmaDevice()) GTEST_SKIP() << "this machine has an RDMA device";
  errno = 0;
  EXPECT_EQ(uscm_device_open(nullptr, 0), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_THAT(uscm_last_error(), HasSubstr("device_open: no RDMA port (first active):0"));
  EXPECT_THAT(uscm_last_error(), HasSubstr("simulated fabric"));
  errno = 0;
  EXPECT_EQ(uscm_device_open("mlx5_7", 2), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_THAT(uscm_last_error(), HasSubstr("no RDMA port mlx5_7:2"));
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

}  // namespace
