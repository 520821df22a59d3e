// The verbs UD transport's error paths. This build machine and CI have no
// RDMA device (the kernel lacks CONFIG_INFINIBAND), so Open() must fail with
// a message that names the fix; on a host with a device these tests skip.
#include "verbs/ud_transport.h"

#include <infiniband/verbs.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

using ::testing::HasSubstr;

bool HostHasRdmaDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return false;
  ibv_free_device_list(list);
  return n > 0;
}

TEST(UdTransportTest, NoDeviceNamesTheFix) {
  if (HostHasRdmaDevice()) GTEST_SKIP() << "this host has an RDMA device";
  auto t = UdTransport::Open(UdOptions{});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(t.status().message());
  EXPECT_THAT(msg, HasSubstr("no RDMA device found"));
  EXPECT_THAT(msg, HasSubstr("modprobe rdma_rxe"));
  EXPECT_THAT(msg, HasSubstr("--fabric=sim"));
}

TEST(UdTransportTest, NamedDeviceWithoutDeviceIsNoDevice) {
  if (HostHasRdmaDevice()) GTEST_SKIP() << "this host has an RDMA device";
  UdOptions o;
  o.device = "mlx5_0";
  o.port_num = 1;
  auto t = UdTransport::Open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

TEST(UdTransportTest, QueueDepthsAreChecked) {
  UdOptions o;
  o.recv_depth = 0;
  auto t = UdTransport::Open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("recv_depth 0"));
  o.recv_depth = 8;
  o.send_depth = 5000;
  t = UdTransport::Open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("send_depth 5000"));
}

}  // namespace
}  // namespace uscm::verbs
