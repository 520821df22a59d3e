// The umad transport's error paths on a host without an RDMA device (CI and
// this build machine: the kernel has no InfiniBand support). The paths with a
// device run against ibsim in //tests/ibsim.
#include "mad/umad_transport.h"

#include <sys/stat.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::mad {
namespace {

using ::testing::HasSubstr;

bool HostHasUmadDevice() {
  struct stat st;
  return stat("/sys/class/infiniband_mad/abi_version", &st) == 0;
}

TEST(UmadTransportTest, NoDeviceSaysWhatToDo) {
  if (HostHasUmadDevice()) GTEST_SKIP() << "this host has an ib_umad device";
  auto t = UmadTransport::Open(UmadOptions{});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("no InfiniBand device found"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("--fabric=sim"));
}

TEST(UmadTransportTest, NamedCaWithoutDeviceIsNoDevice) {
  if (HostHasUmadDevice()) GTEST_SKIP() << "this host has an ib_umad device";
  UmadOptions o;
  o.ca_name = "mlx5_0";
  o.port_num = 1;
  auto t = UmadTransport::Open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("no InfiniBand device found"));
}

TEST(UmadTransportTest, QueryPortWithoutDeviceFails) {
  if (HostHasUmadDevice()) GTEST_SKIP() << "this host has an ib_umad device";
  auto p = QueryUmadPort("", 0);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace uscm::mad
