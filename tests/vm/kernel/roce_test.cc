#include "tests/vm/kernel/roce.h"

#include <vector>

#include "gtest/gtest.h"

namespace uscm::vmtest {
namespace {

class RecordingTransport final : public mad::Transport {
 public:
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    sent.push_back(to);
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)>, size_t) override { return 0; }
  int fd() const override { return -1; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }

  std::vector<mad::MadAddress> sent;
  mad::TransportCaps caps_;
  mad::LocalPort port_;
};

TEST(RoceTest, Ipv4MappedGid) {
  const mad::Gid g = Ipv4MappedGid(0xC0A84E02);  // 192.168.78.2
  EXPECT_EQ(g.ToString(), "::ffff:192.168.78.2");
  EXPECT_TRUE(IsIpv4Mapped(g));
  EXPECT_FALSE(IsIpv4Mapped(*mad::Gid::Parse("fe80::5054:ff:fe4e:2")));
  EXPECT_FALSE(IsIpv4Mapped(mad::Gid()));
}

TEST(RoceTest, SendsFromTheIpv4GidOnlyToIpv4MappedDestinations) {
  RecordingTransport inner;
  inner.port_.ca_name = "rxe0";
  inner.port_.gid = *mad::Gid::Parse("fe80::5054:ff:fe4e:2");
  const mad::Gid mine = Ipv4MappedGid(0xC0A84E02);
  RoceIpv4Transport t(inner, mine, 1);
  EXPECT_EQ(t.port().gid, mine);
  EXPECT_EQ(t.port().ca_name, "rxe0");

  std::vector<uint8_t> mad(256, 0);
  mad::MadAddress to;
  to.has_grh = true;
  to.gid = Ipv4MappedGid(0xC0A84E01);
  ASSERT_TRUE(t.Send(to, mad).ok());
  to.gid = *mad::Gid::Parse("fe80::5054:ff:fe4e:1");
  ASSERT_TRUE(t.Send(to, mad).ok());
  to.has_grh = false;
  to.gid = Ipv4MappedGid(0xC0A84E01);
  ASSERT_TRUE(t.Send(to, mad).ok());

  ASSERT_EQ(inner.sent.size(), 3u);
  EXPECT_EQ(inner.sent[0].sgid_index, 1);
  EXPECT_EQ(inner.sent[1].sgid_index, 0);
  EXPECT_EQ(inner.sent[2].sgid_index, 0);
  EXPECT_EQ(t.counters().sent_from_ipv4_gid, 1u);
  EXPECT_EQ(t.counters().sent_other, 2u);
}

TEST(RoceTest, FindGidIndexNamesTheDeviceWhenMissing) {
  absl::StatusOr<uint8_t> i = FindGidIndex("no_such_ca", 1, Ipv4MappedGid(0x0A000001));
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(i.status().message().find("no_such_ca"), std::string::npos);
}

}  // namespace
}  // namespace uscm::vmtest
