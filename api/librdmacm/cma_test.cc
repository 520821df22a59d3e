// rdma_event_str, rdma_get_src_port / rdma_get_dst_port, rdma_get_devices
// and the id calls on a machine with or without RDMA devices.
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include "api/librdmacm/devices.h"
#include "api/librdmacm/event_channel.h"
#include "gtest/gtest.h"

namespace {

int SystemDeviceCount() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return 0;
  ibv_free_device_list(list);
  return n;
}

TEST(EventStr, LibrdmacmStrings) {
  const char* want[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT",
  };
  for (int i = 0; i < 16; ++i) {
    EXPECT_STREQ(rdma_event_str(static_cast<rdma_cm_event_type>(i)), want[i]) << i;
  }
  EXPECT_STREQ(rdma_event_str(static_cast<rdma_cm_event_type>(16)), "UNKNOWN EVENT");
  EXPECT_STREQ(rdma_event_str(static_cast<rdma_cm_event_type>(-1)), "UNKNOWN EVENT");
}

TEST(Ports, FromTheRouteAddresses) {
  rdma_cm_id id = {};
  EXPECT_EQ(rdma_get_src_port(&id), 0);  // AF_UNSPEC: 0
  auto* src = reinterpret_cast<sockaddr_in*>(&id.route.addr.src_storage);
  src->sin_family = AF_INET;
  src->sin_port = htons(7471);
  auto* dst = reinterpret_cast<sockaddr_in6*>(&id.route.addr.dst_storage);
  dst->sin6_family = AF_INET6;
  dst->sin6_port = htons(18515);
  EXPECT_EQ(rdma_get_src_port(&id), htons(7471));  // network order, as librdmacm
  EXPECT_EQ(rdma_get_dst_port(&id), htons(18515));
}

TEST(Devices, AsLibrdmacm) {
  int n = -1;
  errno = 0;
  ibv_context** devs = rdma_get_devices(&n);
  const int err = errno;
  if (SystemDeviceCount() == 0) {  // (libibverbs sets errno ENOSYS here)
    EXPECT_EQ(devs, nullptr);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(err, ENODEV);
    return;
  }
  ASSERT_NE(devs, nullptr);
  ASSERT_GT(n, 0);
  EXPECT_EQ(devs[n], nullptr);
  // The same contexts every time: opened once per process.
  int again_n = 0;
  ibv_context** again = rdma_get_devices(&again_n);
  ASSERT_EQ(again_n, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(again[i], devs[i]);
  // One shared PD per device.
  ibv_pd* pd = uscm::librdmacm::AcquireSharedPd(devs[0]);
  ASSERT_NE(pd, nullptr) << strerror(errno);
  EXPECT_EQ(uscm::librdmacm::AcquireSharedPd(devs[0]), pd);
  EXPECT_EQ(pd->context, devs[0]);
  EXPECT_EQ(uscm::librdmacm::ReleaseSharedPd(devs[0]), 0);
  EXPECT_EQ(uscm::librdmacm::ReleaseSharedPd(devs[0]), 0);
  rdma_free_devices(again);
  rdma_free_devices(devs);
}

TEST(Devices, SharedPdArgumentErrors) {
  errno = 0;
  EXPECT_EQ(uscm::librdmacm::AcquireSharedPd(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_context not_ours = {};
  errno = 0;
  EXPECT_EQ(uscm::librdmacm::AcquireSharedPd(&not_ours), nullptr);
  EXPECT_EQ(errno, ENODEV);
  errno = 0;
  EXPECT_EQ(uscm::librdmacm::ReleaseSharedPd(&not_ours), -1);
  EXPECT_EQ(errno, EINVAL);
}

// No device: librdmacm's ENODEV from every id call but rdma_destroy_id (which
// needs no device: EINVAL, the fake is no id), no crash. (With a device
// the id calls open a uscm port: ids_test covers them on a simulated one.)
TEST(IdCalls, FailCleanlyWithoutADevice) {
  const bool no_device = SystemDeviceCount() == 0;
  if (!no_device) GTEST_SKIP() << "this machine has an RDMA device";
  const int want = ENODEV;
  errno = 0;
  rdma_event_channel* channel = rdma_create_event_channel();
  if (no_device) {
    // librdmacm's answer, which rping turns into "No RDMA devices were detected".
    EXPECT_EQ(channel, nullptr);
    EXPECT_EQ(errno, ENODEV);
    channel = uscm::librdmacm::NewEventChannel();
  }
  ASSERT_NE(channel, nullptr);
  rdma_cm_id* id = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP), -1);
  EXPECT_EQ(errno, want);
  EXPECT_EQ(id, nullptr);
  errno = 0;
  EXPECT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP), -1);  // synchronous mode
  EXPECT_EQ(errno, want);

  rdma_cm_id fake = {};  // what a program could pass after ignoring the error
  sockaddr_in dst = {};
  dst.sin_family = AF_INET;
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(&fake, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), -1);
  EXPECT_EQ(errno, want);
  errno = 0;
  EXPECT_EQ(rdma_resolve_route(&fake, 2000), -1);
  EXPECT_EQ(errno, want);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(&fake, reinterpret_cast<sockaddr*>(&dst)), -1);
  EXPECT_EQ(errno, want);
  errno = 0;
  EXPECT_EQ(rdma_listen(&fake, 1), -1);
  EXPECT_EQ(errno, want);
  errno = 0;
  EXPECT_EQ(rdma_connect(&fake, nullptr), -1);
  EXPECT_EQ(errno, want);
  errno = 0;
  EXPECT_EQ(rdma_destroy_id(&fake), -1);
  EXPECT_EQ(errno, EINVAL) << "destroying needs no device: not an id of rdma_create_id";

  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.3", "7471", nullptr, &res), 0);
  errno = 0;
  EXPECT_EQ(rdma_create_ep(&id, res, nullptr, nullptr), -1);
  EXPECT_EQ(errno, want);
  rdma_freeaddrinfo(res);
  rdma_destroy_event_channel(channel);
}

}  // namespace
