// RcResources needs a device for everything but its error paths; those are
// tested here (this host has no RDMA device), the data path in the VM lane
// (tests/vm/groups/30-uscm-umad.sh, 40-uscm-ud.sh).
#include "verbs/rc_resources.h"

#include <errno.h>

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

using ::testing::HasSubstr;

// A fake device list of one device named "rxe0".
ibv_device fake_device;
ibv_device* fake_list[2] = {&fake_device, nullptr};
int fake_errno = 0;
int frees = 0;

ibv_device** OneDevice(int* n) {
  std::memset(&fake_device, 0, sizeof fake_device);
  std::strcpy(fake_device.name, "rxe0");
  *n = 1;
  return fake_list;
}
ibv_device** NoList(int* n) {
  *n = 0;
  errno = ENOSYS;  // what libibverbs reports on a kernel without RDMA support
  return nullptr;
}
void CountFree(ibv_device**) { ++frees; }
const char* FakeName(ibv_device* d) { return d->name; }
ibv_context* OpenFails(ibv_device*) {
  errno = fake_errno;
  return nullptr;
}

TEST(RcResourcesTest, NoDeviceOnThisHost) {
  auto r = RcResources::Open({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no RDMA device"));
  EXPECT_THAT(r.status().message(), HasSubstr("rdma link add rxe0 type rxe"));
}

TEST(RcResourcesTest, NoDeviceListNamesTheErrno) {
  RcVerbs v;
  v.get_device_list = &NoList;
  auto r = RcResources::Open({}, v);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("0 found: "));
  EXPECT_THAT(r.status().message(), HasSubstr("errno 38"));
}

TEST(RcResourcesTest, NamedDeviceMissing) {
  RcVerbs v;
  v.get_device_list = &OneDevice;
  v.free_device_list = &CountFree;
  v.device_name = &FakeName;
  frees = 0;
  RcOptions o;
  o.device = "mlx5_0";
  auto r = RcResources::Open(o, v);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no RDMA device named mlx5_0 (1 found)"));
  EXPECT_EQ(frees, 1);
}

TEST(RcResourcesTest, NoPermissionOnUverbs) {
  RcVerbs v;
  v.get_device_list = &OneDevice;
  v.free_device_list = &CountFree;
  v.device_name = &FakeName;
  v.open_device = &OpenFails;
  for (int err : {EACCES, EPERM}) {
    frees = 0;
    fake_errno = err;
    auto r = RcResources::Open({}, v);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(r.status().message(), HasSubstr("cannot open rxe0: no permission on "
                                                "/dev/infiniband/uverbs*"));
    EXPECT_THAT(r.status().message(), HasSubstr("rdma group"));
    EXPECT_EQ(frees, 1);
  }
  fake_errno = ENODEV;
  auto r = RcResources::Open({}, v);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("cannot open rxe0: No such device"));
}

TEST(RcResourcesTest, OptionLimits) {
  RcOptions o;
  o.buffer_bytes = 0;
  EXPECT_THAT(RcResources::Open(o).status().message(),
              HasSubstr("RcOptions.buffer_bytes is 0; must be 1..1 GiB"));
  o.buffer_bytes = 4096;
  o.queue_depth = 0;
  EXPECT_THAT(RcResources::Open(o).status().message(),
              HasSubstr("RcOptions.queue_depth is 0; must be 1..4096"));
}

// The path MTU is capped to the port's active MTU; everything else passes.
std::vector<ibv_qp_attr> modified;
int RecordModify(ibv_qp*, ibv_qp_attr* a, int) {
  modified.push_back(*a);
  return 0;
}
int NoMcast(ibv_qp*, const ibv_gid*, uint16_t) { return 0; }

TEST(RcQpTransitionerTest, CapsPathMtuToActiveMtu) {
  ibv_qp q;
  std::memset(&q, 0, sizeof q);
  q.qp_type = IBV_QPT_RC;
  q.qp_num = 0x12;
  auto t = RcQpTransitioner::Create(&q, 1, IBV_MTU_1024, VerbsOps{&RecordModify, &NoMcast, &NoMcast});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->qp_num(), 0x12u);
  modified.clear();
  cm::QpAttributes rtr;
  rtr.state = cm::QpState::kRtr;
  rtr.mask = cm::kQpState | cm::kQpAv | cm::kQpPathMtu | cm::kQpDestQpn | cm::kQpRqPsn |
             cm::kQpMaxDestRdAtomic | cm::kQpMinRnrTimer;
  rtr.path_mtu = 4;  // 2048 from a REQ built without the port's MTU
  rtr.dest_qpn = 0x34;
  rtr.av.is_global = true;
  rtr.av.hop_limit = 64;
  ASSERT_TRUE((*t)->Modify(rtr).ok());
  ASSERT_EQ(modified.size(), 1u);
  EXPECT_EQ(modified[0].path_mtu, IBV_MTU_1024);
  EXPECT_EQ(modified[0].dest_qp_num, 0x34u);
  EXPECT_EQ(modified[0].ah_attr.grh.sgid_index, 1);
  EXPECT_EQ((*t)->mtu_capped(), 1u);
  rtr.path_mtu = 2;  // 512: below the port's, kept
  ASSERT_TRUE((*t)->Modify(rtr).ok());
  EXPECT_EQ(modified[1].path_mtu, IBV_MTU_512);
  EXPECT_EQ((*t)->mtu_capped(), 1u);
}

TEST(RcQpTransitionerTest, NullQpIsAClearError) {
  auto t = RcQpTransitioner::Create(nullptr, 0, IBV_MTU_1024);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("null ibv_qp"));
}

}  // namespace
}  // namespace uscm::verbs
