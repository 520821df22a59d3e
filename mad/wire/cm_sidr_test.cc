#include "mad/wire/cm_sidr.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::Hex;

// Golden SIDR_REQ, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenSidrReq = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 04 00 00 00 01 | TransactionID
  00 17 00 00             | AttributeID SIDR_REQ, reserved
  00 00 00 00             | AttributeModifier
  00 00 12 34             | +24 RequestID
  ff ff                   | +28 PartitionKey
  00 00                   | +30 reserved
  00 00 00 00 01 11 12 b7 | +32 ServiceID (RDMA_PS_UDP port 4791)
  00 40 13 88             | +40 PrivateData: CMA header start (then zeros)
)");

SidrReqRepr GoldenReq() {
  SidrReqRepr r;
  r.envelope.transaction_id = 0x0000000400000001;
  r.request_id = 0x1234;
  r.partition_key = 0xffff;
  r.service_id = 0x00000000011112b7;
  const uint8_t pd[4] = {0x00, 0x40, 0x13, 0x88};
  r.private_data = PrivateData(pd);
  return r;
}

// Golden SIDR_REP (redirect), commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenSidrRep = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 04 00 00 00 01 | TransactionID (the SIDR_REQ's)
  00 18 00 00             | AttributeID SIDR_REP, reserved
  00 00 00 03             | AttributeModifier = ECE options 3
  00 00 12 34             | +24 RequestID
  04                      | +28 Status 4 (redirect)
  48                      | +29 AdditionalInformationLength 72
  02 c9                   | +30 VendorID[23:8] ("H")
  00 00 45                | +32 QPN 0x45
  03                      | +35 VendorID[7:0] ("L") -> VendorID 0x02c903
  00 00 00 00 01 11 12 b7 | +36 ServiceID (only 4-byte aligned)
  01 23 45 67             | +44 QKey
  01 02 03 04             | +48 AdditionalInformation: ClassPortInfo, kept raw (then zeros)
)") ;

SidrRepRepr GoldenRep() {
  SidrRepRepr r;
  r.envelope.transaction_id = 0x0000000400000001;
  r.request_id = 0x1234;
  r.status = SidrStatus::kRedirect;
  r.additional_info.length = 72;
  r.additional_info.bytes[0] = 1;
  r.additional_info.bytes[1] = 2;
  r.additional_info.bytes[2] = 3;
  r.additional_info.bytes[3] = 4;
  r.ece = {0x02c903, 3};
  r.qpn = 0x45;
  r.service_id = 0x00000000011112b7;
  r.qkey = 0x01234567;
  return r;
}

TEST(SidrReqTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenReq().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenSidrReq.begin()))
      << DiffBytes(buf, kGoldenSidrReq);
}

TEST(SidrReqTest, ParseGolden) {
  auto r = SidrReqRepr::Parse(kGoldenSidrReq);
  ASSERT_TRUE(r.ok()) << r.status();
  SidrReqRepr want = GoldenReq();
  want.private_data = PrivateData(std::span(kGoldenSidrReq).subspan(40, 216));
  EXPECT_EQ(*r, want);
}

TEST(SidrReqTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return SidrReqRepr::Parse(b).status(); }, "SIDR_REQ",
      kGoldenSidrReq,
      {
          {"RequestID", 24, 27},
          {"PartitionKey", 28, 29},
          {"reserved", 30, 31},
          {"ServiceID", 32, 39},
          {"PrivateData", 40, 255},
      });
}

TEST(SidrReqTest, RejectsWrongHeaderAndStatesLimits) {
  auto bad = kGoldenSidrReq;
  bad[17] = 0x18;
  EXPECT_EQ(SidrReqRepr::Parse(bad).status().message(),
            "SIDR_REQ: MAD.AttributeID = 0x0018, expected 0x0017");
  SidrReqRepr r = GoldenReq();
  const std::vector<uint8_t> big(217, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(),
            "SIDR_REQ private data is 217 bytes; SIDR_REQ carries at most 216");
}

TEST(SidrReqTest, RandomRoundTrip) {
  std::mt19937_64 rng(16);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    SidrReqRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.request_id = static_cast<uint32_t>(rng());
    r.partition_key = static_cast<uint16_t>(rng());
    r.service_id = rng();
    r.private_data = testing::RandomPrivateData(rng, sidr_req::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = SidrReqRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

TEST(SidrRepTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRep().Emit(buf).ok()) << GoldenRep().Emit(buf);
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenSidrRep.begin()))
      << DiffBytes(buf, kGoldenSidrRep);
}

TEST(SidrRepTest, ParseGolden) {
  auto r = SidrRepRepr::Parse(kGoldenSidrRep);
  ASSERT_TRUE(r.ok()) << r.status();
  SidrRepRepr want = GoldenRep();
  want.private_data = PrivateData(std::span(kGoldenSidrRep).subspan(120, 136));
  EXPECT_EQ(*r, want);
  EXPECT_STREQ(SidrStatusName(r->status), "redirect");
  ASSERT_TRUE(r->RedirectClassPortInfo().has_value());
  EXPECT_EQ((*r->RedirectClassPortInfo())[3], 4);
}

TEST(SidrRepTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return SidrRepRepr::Parse(b).status(); }, "SIDR_REP",
      kGoldenSidrRep,
      {
          {"RequestID", 24, 27},
          {"Status", 28, 28},
          {"AdditionalInformationLength", 29, 29},
          {"VendorID[23:8]", 30, 31},
          {"QPN", 32, 34},
          {"VendorID[7:0]", 35, 35},
          {"ServiceID", 36, 43},
          {"QKey", 44, 47},
          {"AdditionalInformation", 48, 119},
          {"PrivateData", 120, 255},
      });
}

TEST(SidrRepTest, LinuxVendorIdQuirk) {
  // Linux writes H = (vendor >> 8) & 0xff, L = vendor & 0xff: for 0x02c903 the
  // wire carries H = 0x00c9, so we read 0x00c903 (bits 23..16 are lost).
  auto linux_bytes = kGoldenSidrRep;
  linux_bytes[30] = 0x00;
  linux_bytes[31] = 0xc9;
  auto r = SidrRepRepr::Parse(linux_bytes);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ece.vendor_id, 0x00c903u);
  // Below 0x10000 our bytes and Linux's agree.
  SidrRepRepr small = GoldenRep();
  small.ece.vendor_id = 0xc903;
  auto buf = testing::Poisoned();
  ASSERT_TRUE(small.Emit(buf).ok());
  EXPECT_EQ(buf[30], 0x00);
  EXPECT_EQ(buf[31], 0xc9);
  EXPECT_EQ(buf[35], 0x03);
}

TEST(SidrRepTest, StatusAndInfoChecks) {
  auto bad = kGoldenSidrRep;
  bad[29] = 73;
  EXPECT_EQ(SidrRepRepr::Parse(bad).status().message(),
            "SIDR_REP.AdditionalInformationLength = 73; the AdditionalInformation field holds "
            "at most 72 bytes");
  auto odd = kGoldenSidrRep;
  odd[28] = 0x99;  // unknown status survives
  auto r = SidrRepRepr::Parse(odd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<int>(r->status), 0x99);
  EXPECT_EQ(SidrStatusName(r->status), nullptr);
  EXPECT_FALSE(r->RedirectClassPortInfo().has_value());
  auto out = testing::Poisoned();
  ASSERT_TRUE(r->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), odd.begin())) << DiffBytes(out, odd);

  SidrRepRepr e = GoldenRep();
  e.envelope.attribute_modifier = 3;
  EXPECT_THAT(e.Emit(out).message(), HasSubstr("set ece.options instead"));
  e = GoldenRep();
  const std::vector<uint8_t> big(137, 1);
  e.private_data = PrivateData(big);
  EXPECT_EQ(e.Emit(out).message(),
            "SIDR_REP private data is 137 bytes; SIDR_REP carries at most 136");
}

TEST(SidrRepTest, RandomRoundTrip) {
  std::mt19937_64 rng(17);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    SidrRepRepr r;
    r.envelope = testing::RandomEnvelope(rng, false);
    r.request_id = static_cast<uint32_t>(rng());
    r.status = static_cast<SidrStatus>(rng());
    r.additional_info = testing::RandomInfoBlock(rng);
    r.ece = {static_cast<uint32_t>(rng() & 0xFFFFFF), static_cast<uint32_t>(rng())};
    r.qpn = rng() & 0xFFFFFF;
    r.service_id = rng();
    r.qkey = static_cast<uint32_t>(rng());
    r.private_data = testing::RandomPrivateData(rng, sidr_rep::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = SidrRepRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
