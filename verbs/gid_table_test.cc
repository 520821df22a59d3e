#include "verbs/gid_table.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

mad::Gid G(const char* text) { return *mad::Gid::Parse(text); }

// Stands for a device context: ReadPortGidTable only hands it to the query.
ibv_context* FakeContext() {
  static ibv_context ctx{};
  return &ctx;
}

ibv_gid_entry Entry(uint32_t port, uint32_t index, const char* gid, uint32_t type,
                    uint32_t ifindex = 0) {
  ibv_gid_entry e{};
  e.ndev_ifindex = ifindex;
  e.port_num = port;
  e.gid_index = index;
  e.gid_type = type;
  memcpy(e.gid.raw, G(gid).raw.data(), 16);
  return e;
}

int g_queries = 0;
size_t g_asked = 0;

// What the kernel answers for a two-port device: the non-zero entries of
// both ports, not in index order.
ssize_t TwoPorts(ibv_context*, ibv_gid_entry* entries, size_t max_entries) {
  ++g_queries;
  g_asked = max_entries;
  const ibv_gid_entry all[] = {
      Entry(1, 3, "::ffff:192.168.77.1", IBV_GID_TYPE_ROCE_V2),
      Entry(2, 0, "fe80::5054:ff:fe55:2", IBV_GID_TYPE_ROCE_V1),
      Entry(1, 0, "fe80::5054:ff:fe55:1", IBV_GID_TYPE_ROCE_V1),
      Entry(1, 2, "::ffff:192.168.77.1", IBV_GID_TYPE_ROCE_V1),
      Entry(1, 1, "fe80::5054:ff:fe55:1", IBV_GID_TYPE_ROCE_V2),
  };
  const size_t n = sizeof(all) / sizeof(all[0]);
  if (max_entries < n) return -EINVAL;
  memcpy(entries, all, sizeof(all));
  return static_cast<ssize_t>(n);
}

ssize_t Unsupported(ibv_context*, ibv_gid_entry*, size_t) {
  ++g_queries;
  return -EOPNOTSUPP;
}

// A sysfs tree under the test's directory with port 1 of `ca`: index i's GID
// and, when given, its type and its netdev's name.
std::string FakeSysfs(const std::string& ca, const std::vector<const char*>& gids,
                      const std::vector<const char*>& types,
                      const std::vector<const char*>& ndevs = {}) {
  const std::filesystem::path root =
      std::filesystem::path(getenv("TEST_TMPDIR")) / ("sysfs-" + ca);
  const auto port = root / "class/infiniband" / ca / "ports/1";
  std::filesystem::create_directories(port / "gids");
  std::filesystem::create_directories(port / "gid_attrs/types");
  std::filesystem::create_directories(port / "gid_attrs/ndevs");
  for (size_t i = 0; i < gids.size(); ++i) {
    std::ofstream(port / "gids" / std::to_string(i)) << gids[i] << "\n";
    if (i < types.size()) std::ofstream(port / "gid_attrs/types" / std::to_string(i)) << types[i] << "\n";
    if (i < ndevs.size()) std::ofstream(port / "gid_attrs/ndevs" / std::to_string(i)) << ndevs[i] << "\n";
  }
  return root.string();
}

TEST(ReadPortGidTableTest, OneQueryGivesThePortsEntriesByIndexWithTheirTypes) {
  g_queries = 0;
  // No sysfs tree at all: the answer cannot come from there.
  absl::StatusOr<std::vector<GidTableEntry>> t =
      ReadPortGidTable(FakeContext(), "rxe0", 1, 2 * 8, "/nonexistent", TwoPorts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(g_queries, 1);
  EXPECT_EQ(g_asked, 16u);
  ASSERT_EQ(t->size(), 4u);
  EXPECT_EQ((*t)[0].gid, G("fe80::5054:ff:fe55:1"));
  EXPECT_TRUE((*t)[0].not_v2);
  EXPECT_EQ((*t)[1].gid, G("fe80::5054:ff:fe55:1"));
  EXPECT_FALSE((*t)[1].not_v2);
  EXPECT_EQ((*t)[2].gid, G("::ffff:192.168.77.1"));
  EXPECT_TRUE((*t)[2].not_v2);
  EXPECT_EQ((*t)[3].gid, G("::ffff:192.168.77.1"));
  EXPECT_FALSE((*t)[3].not_v2);

  t = ReadPortGidTable(FakeContext(), "rxe0", 2, 16, "/nonexistent", TwoPorts);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].gid, G("fe80::5054:ff:fe55:2"));
}

TEST(ReadPortGidTableTest, AFailedQueryReadsSysfsGidsAndTypes) {
  const std::string sysfs = FakeSysfs(
      "rxe5",
      {"fe80:0000:0000:0000:5054:00ff:fe55:0001", "0000:0000:0000:0000:0000:ffff:c0a8:4d01",
       "0000:0000:0000:0000:0000:ffff:c0a8:4d01", "0000:0000:0000:0000:0000:0000:0000:0000"},
      {"IB/RoCE v1", "IB/RoCE v1", "RoCE v2"});  // index 3: no type file (unused entry)
  g_queries = 0;
  absl::StatusOr<std::vector<GidTableEntry>> t =
      ReadPortGidTable(FakeContext(), "rxe5", 1, 16, sysfs, Unsupported);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(g_queries, 1);
  ASSERT_EQ(t->size(), 4u);
  EXPECT_TRUE((*t)[0].not_v2);
  EXPECT_EQ((*t)[1].gid, G("::ffff:192.168.77.1"));
  EXPECT_TRUE((*t)[1].not_v2);
  EXPECT_EQ((*t)[2].gid, G("::ffff:192.168.77.1"));
  EXPECT_FALSE((*t)[2].not_v2);
  EXPECT_TRUE((*t)[3].gid.is_zero());
  EXPECT_FALSE((*t)[3].not_v2) << "a type that cannot be read is not taken for v1";
}

TEST(ReadPortGidTableTest, WithoutAContextSysfsAnswersAndNoQueryIsMade) {
  const std::string sysfs = FakeSysfs("rxe6", {"0000:0000:0000:0000:0000:ffff:c0a8:4d02"}, {});
  g_queries = 0;
  absl::StatusOr<std::vector<GidTableEntry>> t =
      ReadPortGidTable(nullptr, "rxe6", 1, 0, sysfs, TwoPorts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(g_queries, 0);
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].gid, G("::ffff:192.168.77.2"));
}

// A VLAN on the rxe's netdev (eth0.100 on eth0): the link-local GID of the one
// MAC twice, an entry per netdev, told apart by the entry's ifindex.
ssize_t VlanPort(ibv_context*, ibv_gid_entry* entries, size_t max_entries) {
  const ibv_gid_entry all[] = {
      Entry(1, 0, "fe80::5054:ff:fe55:1", IBV_GID_TYPE_ROCE_V2, 2),
      Entry(1, 1, "::ffff:192.168.78.1", IBV_GID_TYPE_ROCE_V2, 2),
      Entry(1, 2, "fe80::5054:ff:fe55:1", IBV_GID_TYPE_ROCE_V2, 3),
  };
  const size_t n = sizeof(all) / sizeof(all[0]);
  if (max_entries < n) return -EINVAL;
  memcpy(entries, all, sizeof(all));
  return static_cast<ssize_t>(n);
}

TEST(ReadPortGidTableTest, EachEntryKeepsItsNetdev) {
  absl::StatusOr<std::vector<GidTableEntry>> t =
      ReadPortGidTable(FakeContext(), "rxe0", 1, 16, "/nonexistent", VlanPort);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].gid, (*t)[2].gid);
  EXPECT_EQ((*t)[0].ifindex, 2);
  EXPECT_EQ((*t)[1].ifindex, 2);
  EXPECT_EQ((*t)[2].ifindex, 3);
}

TEST(ReadPortGidTableTest, SysfsGivesTheNetdevByName) {
  // "lo" is in every network namespace, the test's sandbox included.
  const std::string sysfs =
      FakeSysfs("rxe7", {"fe80:0000:0000:0000:5054:00ff:fe55:0001", "fe80:0000:0000:0000:5054:00ff:fe55:0001"},
                {"RoCE v2", "RoCE v2"}, {"lo", "no-such-netdev"});
  absl::StatusOr<std::vector<GidTableEntry>> t =
      ReadPortGidTable(nullptr, "rxe7", 1, 0, sysfs);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].ifindex, static_cast<int>(if_nametoindex("lo")));
  EXPECT_NE((*t)[0].ifindex, 0);
  EXPECT_EQ((*t)[1].ifindex, 0) << "a netdev not in this namespace is not known";
}

TEST(ReadPortGidTableTest, NoTableAnywhereIsNotFound) {
  absl::StatusOr<std::vector<GidTableEntry>> t =
      ReadPortGidTable(FakeContext(), "rxe9", 1, 16, "/nonexistent", Unsupported);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound) << t.status();
}

}  // namespace
}  // namespace uscm::verbs
