// uscm_set_qp's source GID index (api/c/set_qp_gid.h) on a RoCE port with a
// VLAN (eth0.100 on eth0): the link-local fe80:: is in an entry of each.
#include "api/c/set_qp_gid.h"

#include <vector>

#include "api/rdma_cm/one_device_fixture.h"
#include "api/rdma_cm/rdma_cm.h"
#include "gtest/gtest.h"

namespace uscm::c_api {
namespace {

// rxe's table with a VLAN, as the kernel lists it: eth0 is ifindex 2,
// eth0.100 ifindex 3 (api/rdma_cm/roce_vlan_test.cc's VlanPort).
const std::vector<mad::Gid> kTable = {
    *mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("::ffff:192.168.78.1"),
    *mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("::ffff:192.168.100.1")};

class SetQpGidTest : public testing::OneDeviceTest {
 protected:
  void SetUp() override {
    DeviceOptions o;
    o.roce = true;
    o.roce_path_mtu = 3;
    o.roce_gids = kTable;
    o.roce_gid_ifindexes = {2, 2, 3, 3};
    o.local_ips = {*Address::Parse("fe80::1"), *Address::Parse("192.168.78.1"),
                   *Address::Parse("192.168.100.1")};
    ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/5, o));
  }
  // The index for an id bound to `text` (scope_id `scope`), read from a live
  // table of kTable's GIDs, all RoCE v2.
  int IndexFor(const char* text, uint32_t scope) {
    Address a = *Address::Parse(text);
    a.scope_id = scope;
    CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
    EXPECT_TRUE(id->BindAddr(a).ok()) << a.ToString();
    return SetQpSourceGidIndex(*id, static_cast<int>(kTable.size()),
                               [](int i) -> absl::optional<LiveGid> {
                                 return LiveGid{kTable[static_cast<size_t>(i)], true};
                               });
  }
};

// Before, the first entry of the address (eth0's, 0) whatever the scope: the
// QP sent untagged on eth0 while the REQ left from eth0.100's entry.
TEST_F(SetQpGidTest, AVlansLinkLocalAddressGetsTheVlansEntry) {
  EXPECT_EQ(IndexFor("[fe80::1]:7200", 3), 2);
  EXPECT_EQ(IndexFor("[fe80::1]:7201", 2), 0);
}

TEST_F(SetQpGidTest, AGlobalAddressGetsItsEntry) {
  EXPECT_EQ(IndexFor("192.168.100.1:7202", 0), 3);
  EXPECT_EQ(IndexFor("192.168.78.1:7203", 0), 1);
}

}  // namespace
}  // namespace uscm::c_api
