#include "mad/capture/roce_frame.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::mad::capture {
namespace {

using ::testing::HasSubstr;

// One RoCE v2 UD SEND to QP1 as qemu's filter-dump records it.
std::vector<uint8_t> Frame() {
  std::vector<uint8_t> f = {
      0x52, 0x54, 0x00, 0x55, 0x00, 0x02,  // dst MAC
      0x52, 0x54, 0x00, 0x55, 0x00, 0x01,  // src MAC
      0x08, 0x00,                          // IPv4
      0x45, 0x00, 0x01, 0x34,              // v4, IHL 5, DSCP 0, total 308
      0xfe, 0x76, 0x40, 0x00,              // id, DF
      0x40, 0x11, 0x00, 0x00,              // TTL 64, UDP, checksum
      192, 168, 78, 1,                     // src
      192, 168, 78, 2,                     // dst
      0xd8, 0x72, 0x12, 0xb7,              // UDP 55410 -> 4791
      0x01, 0x20, 0x00, 0x00,              // length 288, checksum 0
      0x64, 0x00, 0xff, 0xff,              // BTH: UD SEND only, P_Key 0xffff
      0x00, 0x00, 0x00, 0x01,              // dest QP 1
      0x80, 0x00, 0x00, 0x02,              // AckReq, PSN 2
      0x80, 0x01, 0x00, 0x00,              // DETH: Q_Key 0x80010000
      0x00, 0x00, 0x00, 0x01,              // source QP 1
  };
  for (int i = 0; i < 256; ++i) f.push_back(static_cast<uint8_t>(i));  // the MAD
  for (uint8_t b : {0x7b, 0xd0, 0x85, 0x14}) f.push_back(b);            // ICRC
  return f;
}

TEST(RoceFrameTest, ParsesEveryHeader) {
  const std::vector<uint8_t> f = Frame();
  absl::StatusOr<RoceV2Frame> r = ParseRoceV2Frame(f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->src_mac[5], 0x01);
  EXPECT_EQ(r->dst_mac[5], 0x02);
  EXPECT_FALSE(r->ipv6);
  EXPECT_EQ(r->src_ip[15], 1);
  EXPECT_EQ(r->dst_ip[15], 2);
  EXPECT_EQ(r->src_ip[10], 0xFF);
  EXPECT_EQ(r->hop_limit, 64);
  EXPECT_EQ(r->traffic_class, 0);
  EXPECT_EQ(r->src_port, 55410);
  EXPECT_EQ(r->dst_port, 4791);
  EXPECT_EQ(r->opcode, kBthOpcodeUdSendOnly);
  EXPECT_EQ(r->pkey, 0xFFFF);
  EXPECT_EQ(r->dest_qp, 1u);
  EXPECT_TRUE(r->ack_request);
  EXPECT_EQ(r->psn, 2u);
  EXPECT_TRUE(r->has_deth);
  EXPECT_EQ(r->qkey, 0x80010000u);
  EXPECT_EQ(r->src_qp, 1u);
  EXPECT_EQ(r->icrc, 0x7bd08514u);
  ASSERT_EQ(r->payload.size(), 256u);
  EXPECT_EQ(r->payload[0], 0);
  EXPECT_EQ(r->payload[255], 255);
}

TEST(RoceFrameTest, EthernetPaddingIsNotPayload) {
  std::vector<uint8_t> f = Frame();
  f.insert(f.end(), 6, 0);  // padding after the IP datagram
  absl::StatusOr<RoceV2Frame> r = ParseRoceV2Frame(f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->payload.size(), 256u);
  EXPECT_EQ(r->icrc, 0x7bd08514u);
}

TEST(RoceFrameTest, OtherTrafficIsNotFound) {
  std::vector<uint8_t> arp = Frame();
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(ParseRoceV2Frame(arp).status().code(), absl::StatusCode::kNotFound);
  std::vector<uint8_t> udp = Frame();
  udp[36] = 0x00;  // destination port 0x00b7
  EXPECT_THAT(ParseRoceV2Frame(udp).status().message(), HasSubstr("not RoCE v2 (4791)"));
  EXPECT_EQ(ParseRoceV2Frame(std::vector<uint8_t>(10, 0)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RoceFrameTest, TruncationNamesTheHeader) {
  const std::vector<uint8_t> f = Frame();
  auto cut = [&](size_t n) {
    std::vector<uint8_t> c(f.begin(), f.begin() + n);
    return std::string(ParseRoceV2Frame(c).status().message());
  };
  EXPECT_THAT(cut(20), HasSubstr("IPv4 header needs 20 bytes; 6 remain"));
  EXPECT_THAT(cut(38), HasSubstr("UDP header needs 8 bytes; 4 remain"));
  EXPECT_THAT(cut(50), HasSubstr("BTH + ICRC needs 16 bytes; 8 remain"));
  EXPECT_THAT(cut(60), HasSubstr("DETH + ICRC needs 12 bytes; 6 remain"));
}

}  // namespace
}  // namespace uscm::mad::capture
