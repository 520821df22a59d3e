#include "mad/wire/cma_header.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_req.h"
#include "mad/wire/cm_sidr.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using testing::DiffBytes;
using testing::Hex;

// The digest's example: 10.0.0.1:5000 -> 10.0.0.2:7471 over RDMA_PS_TCP.
const std::vector<uint8_t> kExample = Hex(R"(
  00                                        | CMAVersion 0
  40                                        | IPVersion 4, reserved
  13 88                                     | SrcPort 5000
  00 00 00 00 00 00 00 00 00 00 00 00 0a 00 00 01 | SrcAddr 10.0.0.1 (12 zero bytes first)
  00 00 00 00 00 00 00 00 00 00 00 00 0a 00 00 02 | DstAddr 10.0.0.2
)", 36);

TEST(CmaHeaderTest, DigestExampleBytesAndServiceId) {
  const CmaHeader h = CmaHeader::Ipv4(0x0a000001, 5000, 0x0a000002);
  std::array<uint8_t, 36> out;
  out.fill(testing::kPoison);
  ASSERT_TRUE(h.Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), kExample.begin())) << DiffBytes(out, kExample);
  EXPECT_EQ(ServiceIdFor(PortSpace::kTcp, 7471), 0x0000000001061D2Full);
  EXPECT_EQ(h.ToString(), "10.0.0.1:5000 -> 10.0.0.2");

  auto back = CmaHeader::Parse(kExample);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);
  EXPECT_EQ(back->src_ipv4(), 0x0a000001u);
  EXPECT_EQ(back->dst_ipv4(), 0x0a000002u);
}

TEST(CmaHeaderTest, PortSpaces) {
  EXPECT_EQ(ServiceIdFor(PortSpace::kIpoib, 1), 0x0000000000020001ull);
  EXPECT_EQ(ServiceIdFor(PortSpace::kUdp, 4791), 0x00000000011112b7ull);
  EXPECT_EQ(ServiceIdFor(PortSpace::kIb, 0xffff), 0x00000000013fffffull);
  EXPECT_EQ(SplitServiceId(0x0000000001061D2F), (ServiceIdParts{PortSpace::kTcp, 7471}));
  EXPECT_STREQ(PortSpaceName(SplitServiceId(0x11112b7)->port_space), "RDMA_PS_UDP");
  EXPECT_FALSE(SplitServiceId(0x0200000000000000).has_value());  // IB_CM_ASSIGN_SERVICE_ID
  auto odd = SplitServiceId(0x0000000012340001);  // unknown port space kept
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(static_cast<uint16_t>(odd->port_space), 0x1234);
  EXPECT_EQ(PortSpaceName(odd->port_space), nullptr);
}

TEST(CmaHeaderTest, Ipv6) {
  std::array<uint8_t, 16> a{}, b{};
  a[0] = 0xfe;
  a[1] = 0x80;
  a[15] = 1;
  b = a;
  b[15] = 2;
  const CmaHeader h = CmaHeader::Ipv6(a, 18515, b);
  std::array<uint8_t, 36> out;
  ASSERT_TRUE(h.Emit(out).ok());
  EXPECT_EQ(out[1], 0x60);
  EXPECT_EQ(out[4], 0xfe);
  EXPECT_EQ(out[35], 2);
  auto back = CmaHeader::Parse(out);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, h);
  EXPECT_EQ(h.ToString(), "[fe80::1]:18515 -> [fe80::2]");
}

TEST(CmaHeaderTest, TruncationErrorAtEveryPrefix) {
  for (size_t n = 0; n < 36; ++n) {
    std::string want;
    if (n < 1) want = "CMAVersion (bytes 0..0)";
    else if (n < 2) want = "IPVersion (bytes 1..1)";
    else if (n < 4) want = "SrcPort (bytes 2..3)";
    else if (n < 20) want = "SrcAddr (bytes 4..19)";
    else want = "DstAddr (bytes 20..35)";
    EXPECT_EQ(CmaHeader::Parse(std::span(kExample).first(n)).status().message(),
              absl::StrCat("CMA header truncated: ", n, " of 36 bytes; ", want, " is incomplete"))
        << n;
  }
}

TEST(CmaHeaderTest, VersionChecks) {
  auto bad = kExample;
  bad[0] = 0x10;
  EXPECT_EQ(CmaHeader::Parse(bad).status().message(),
            "CMA header: CMAVersion = 0x10; only version 0 is defined");
  bad = kExample;
  bad[1] = 0x50;
  EXPECT_EQ(CmaHeader::Parse(bad).status().message(), "CMA header: IPVersion = 5; expected 4 or 6");
  bad = kExample;
  bad[1] = 0x4f;  // reserved low nibble is ignored
  EXPECT_TRUE(CmaHeader::Parse(bad).ok());
  CmaHeader h;
  h.ip_version = 5;
  std::array<uint8_t, 36> out;
  EXPECT_EQ(h.Emit(out).message(), "CMA header: IPVersion = 5; expected 4 or 6");
}

TEST(CmaHeaderTest, InsideAReqAndItsUserDataLimit) {
  const CmaHeader h = CmaHeader::Ipv4(0x0a000001, 5000, 0x0a000002);
  const std::vector<uint8_t> user = {'h', 'i'};
  auto pd = CmaPrivateData("REQ", req::kPrivateDataBytes, h, user);
  ASSERT_TRUE(pd.ok()) << pd.status();
  ReqRepr r;
  r.service_id = ServiceIdFor(PortSpace::kTcp, 7471);
  r.private_data = *pd;
  auto mad = testing::Poisoned();
  ASSERT_TRUE(r.Emit(mad).ok());
  EXPECT_TRUE(std::equal(kExample.begin(), kExample.end(), mad.begin() + 164));
  EXPECT_EQ(mad[200], 'h');
  auto parsed = ReqRepr::Parse(mad);
  ASSERT_TRUE(parsed.ok());
  auto back = CmaHeader::Parse(parsed->private_data.bytes());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, h);
  EXPECT_EQ(CmaUserData(parsed->private_data.bytes()).size(), 56u);
  EXPECT_EQ(CmaUserData(parsed->private_data.bytes())[1], 'i');

  const std::vector<uint8_t> big(57, 1);
  EXPECT_EQ(CmaPrivateData("REQ", req::kPrivateDataBytes, h, big).status().message(),
            "REQ user private data is 57 bytes; with the 36-byte CMA header REQ carries at most "
            "56");
  const std::vector<uint8_t> sidr_max(180, 1);
  EXPECT_TRUE(CmaPrivateData("SIDR_REQ", sidr_req::kPrivateDataBytes, h, sidr_max).ok());
}

TEST(CmaHeaderTest, RandomRoundTrip) {
  std::mt19937_64 rng(20);
  std::array<uint8_t, 36> out;
  for (int i = 0; i < 10000; ++i) {
    CmaHeader h;
    h.ip_version = rng() & 1 ? 4 : 6;
    h.src_port = static_cast<uint16_t>(rng());
    testing::RandomBytes(rng, h.src_addr);
    testing::RandomBytes(rng, h.dst_addr);
    ASSERT_TRUE(h.Emit(out).ok());
    auto back = CmaHeader::Parse(out);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, h);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
