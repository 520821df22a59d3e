#include "verbs/roce_addressing.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

using ::testing::HasSubstr;

mad::Gid G(const char* text) { return *mad::Gid::Parse(text); }

// Records what reaches the wrapped transport.
class Recorder final : public mad::Transport {
 public:
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t>) override {
    sent.push_back(to);
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)>, size_t) override { return 0; }
  int fd() const override { return -1; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }
  std::vector<mad::MadAddress> sent;

 private:
  mad::TransportCaps caps_;
  mad::LocalPort port_;
};

// rxe's table: GID 0 link-local from the MAC, GID 1 the IPv4-mapped address.
std::vector<mad::Gid> RxeTable() {
  return {G("fe80::5054:ff:fe55:1"), G("::ffff:192.168.77.1"), mad::Gid{}};
}

TEST(RoceAddressingTest, Ipv4MappedGid) {
  EXPECT_EQ(Ipv4MappedGid(0xC0A84D02), G("::ffff:192.168.77.2"));
  EXPECT_TRUE(IsIpv4Mapped(G("::ffff:10.0.0.1")));
  EXPECT_FALSE(IsIpv4Mapped(G("fe80::1")));
  EXPECT_FALSE(IsIpv4Mapped(G("::1:ffff:10.0.0.1")));
  EXPECT_FALSE(IsIpv4Mapped(mad::Gid{}));
}

TEST(RoceAddressingTest, PathFromIps) {
  const cm::PathInfo p = RocePathFromIps(0xC0A84D01, 0xC0A84D02);
  EXPECT_EQ(p.local_gid, G("::ffff:192.168.77.1"));
  EXPECT_EQ(p.remote_gid, G("::ffff:192.168.77.2"));
  EXPECT_EQ(p.local_lid, 0xFFFF);
  EXPECT_EQ(p.remote_lid, 0xFFFF);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.local_ack_timeout, 19);
  EXPECT_EQ(p.packet_life_time, 18);
}

TEST(RoceAddressingTest, ReadGidTableFromSysfs) {
  const std::filesystem::path root =
      std::filesystem::path(std::getenv("TEST_TMPDIR")) / "sysfs-ok";
  const auto dir = root / "class/infiniband/rxe0/ports/1/gids";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "0") << "fe80:0000:0000:0000:5054:00ff:fe55:0001\n";
  std::ofstream(dir / "1") << "0000:0000:0000:0000:0000:ffff:c0a8:4d01\n";
  std::ofstream(dir / "2") << "0000:0000:0000:0000:0000:0000:0000:0000\n";
  auto t = ReadGidTable("rxe0", 1, root.string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, RxeTable());
  auto i = GidIndex(*t, G("::ffff:192.168.77.1"));
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(*i, 1);
}

TEST(RoceAddressingTest, ReadGidTableNoDevice) {
  auto t = ReadGidTable("rxe9", 1, std::string(std::getenv("TEST_TMPDIR")) + "/nothing");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("no RDMA device rxe9 port 1"));
  EXPECT_THAT(t.status().message(), HasSubstr("rdma link add rxe9 type rxe"));
}

TEST(RoceAddressingTest, ReadGidTableGarbage) {
  const std::filesystem::path root =
      std::filesystem::path(std::getenv("TEST_TMPDIR")) / "sysfs-bad";
  const auto dir = root / "class/infiniband/rxe0/ports/1/gids";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "0") << "not-a-gid\n";
  auto t = ReadGidTable("rxe0", 1, root.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(), HasSubstr("\"not-a-gid\" is not a GID"));
}

TEST(RoceAddressingTest, GidIndexNotFoundListsTable) {
  auto i = GidIndex(RxeTable(), G("::ffff:10.1.2.3"));
  EXPECT_EQ(i.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(i.status().message(), HasSubstr("::ffff:10.1.2.3"));
  EXPECT_THAT(i.status().message(), HasSubstr("1=::ffff:192.168.77.1"));
}

TEST(RoceAddressingTest, Ipv4DestinationGetsIpv4SourceGid) {
  Recorder inner;
  RoceAddressing r(inner, RxeTable());
  mad::MadAddress to;
  to.has_grh = true;
  to.gid = G("::ffff:192.168.77.2");
  to.sgid_index = 0;  // what the CM core fills in
  const uint8_t mad[256] = {};
  ASSERT_TRUE(r.Send(to, mad).ok());
  ASSERT_EQ(inner.sent.size(), 1u);
  EXPECT_EQ(inner.sent[0].sgid_index, 1);
  EXPECT_EQ(inner.sent[0].qpn, mad::kQp1);
  EXPECT_EQ(r.counters().sgid_fixed, 1u);
}

// The port's IPv4 address moved (the old one removed, a new one at index
// 2): MADs leave from the GID the table holds now, not the empty entry.
TEST(RoceAddressingTest, SetGidsFollowsTheTable) {
  Recorder inner;
  RoceAddressing r(inner, RxeTable());
  r.SetGids({G("fe80::5054:ff:fe55:1"), mad::Gid{}, G("::ffff:192.168.77.12")});
  mad::MadAddress to;
  to.has_grh = true;
  to.gid = G("::ffff:192.168.77.2");
  to.sgid_index = 0;
  EXPECT_EQ(r.Rewrite(to).sgid_index, 2);
  to.sgid_index = 1;  // a reply to a MAD addressed to the old GID
  EXPECT_EQ(r.Rewrite(to).sgid_index, 2) << "index 1 is empty now";
}

TEST(RoceAddressingTest, MatchingIndexKept) {
  Recorder inner;
  RoceAddressing r(inner, RxeTable());
  mad::MadAddress reply;  // as received: the kernel names the GID it was sent to
  reply.has_grh = true;
  reply.gid = G("::ffff:192.168.77.2");
  reply.sgid_index = 1;
  EXPECT_EQ(r.Rewrite(reply), reply);
  mad::MadAddress local;
  local.has_grh = true;
  local.gid = G("fe80::1");
  local.sgid_index = 0;
  EXPECT_EQ(r.Rewrite(local), local);
  EXPECT_EQ(r.counters().sgid_fixed, 0u);
}

TEST(RoceAddressingTest, LinkLocalDestinationGetsLinkLocalSource) {
  Recorder inner;
  RoceAddressing r(inner, RxeTable());
  mad::MadAddress to;
  to.has_grh = true;
  to.gid = G("fe80::2");
  to.sgid_index = 1;
  EXPECT_EQ(r.Rewrite(to).sgid_index, 0);
}

TEST(RoceAddressingTest, NoGidOfThatFamilyIsCountedAndUnchanged) {
  Recorder inner;
  RoceAddressing r(inner, {G("fe80::1")});
  mad::MadAddress to;
  to.has_grh = true;
  to.gid = G("::ffff:10.0.0.2");
  EXPECT_EQ(r.Rewrite(to), to);
  EXPECT_EQ(r.counters().no_sgid, 1u);
}

TEST(RoceAddressingTest, WithoutGrhNothingChanges) {
  Recorder inner;
  RoceAddressing r(inner, RxeTable());
  mad::MadAddress to;
  to.lid = 7;
  to.gid = G("::ffff:192.168.77.2");
  EXPECT_EQ(r.Rewrite(to), to);
}

TEST(RoceAddressingTest, Qp1RedirectedToPeerUdQpOnlyForThatGid) {
  Recorder inner;
  RoceAddressing r(inner, RxeTable());
  r.RedirectQp1(G("::ffff:192.168.77.2"), 0x11, 0x11111);
  mad::MadAddress to;
  to.has_grh = true;
  to.gid = G("::ffff:192.168.77.2");
  mad::MadAddress a = r.Rewrite(to);
  EXPECT_EQ(a.qpn, 0x11u);
  EXPECT_EQ(a.qkey, 0x11111u);
  EXPECT_EQ(r.counters().redirected, 1u);
  to.gid = G("::ffff:192.168.77.3");
  a = r.Rewrite(to);
  EXPECT_EQ(a.qpn, mad::kQp1);
  EXPECT_EQ(a.qkey, mad::kQp1Qkey);
  to.gid = G("::ffff:192.168.77.2");
  to.qpn = 0x22;  // already a UD QP (a reply): left alone
  to.qkey = 0x11111;
  EXPECT_EQ(r.Rewrite(to).qpn, 0x22u);
  EXPECT_EQ(r.counters().redirected, 1u);
}

}  // namespace
}  // namespace uscm::verbs
