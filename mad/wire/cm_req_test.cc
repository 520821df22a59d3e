#include "mad/wire/cm_req.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::FieldSpan;
using testing::Hex;

// Golden REQ, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenReq = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 02 aa bb cc dd | TransactionID
  00 10 00 00             | AttributeID REQ, reserved
  00 00 00 05             | AttributeModifier = ECE options 5
  11 22 33 44             | +24 LocalCommID
  00                      | +28 reserved
  02 c9 03                | +29 VendorID 0x02c903 (ECE)
  00 00 00 00 01 06 1d 2f | +32 ServiceID (RDMA_PS_TCP port 7471)
  00 02 c9 03 00 a1 b2 c3 | +40 LocalCAGUID
  00 00 00 00             | +48 reserved
  00 00 ab cd             | +52 LocalQKey
  00 01 23                | +56 LocalQPN 0x123
  04                      | +59 ResponderResources 4
  00 04 56                | +60 LocalEECN 0x456
  08                      | +63 InitiatorDepth 8
  00 07 89                | +64 RemoteEECN 0x789
  a7                      | +67 RemoteCMResponseTimeout 20, TransportServiceType 3, E2E 1
  12 34 56                | +68 StartingPSN
  97                      | +71 LocalCMResponseTimeout 18, RetryCount 7
  ff ff                   | +72 PartitionKey
  5e                      | +74 MTU 5 (4096), RDCExists 1, RNRRetryCount 6
  f9                      | +75 MaxCMRetries 15, SRQ 1, ExtendedTransportType 1 (XRC)
  00 0a 00 0b             | +76 PrimaryLocalPortLID 10, PrimaryRemotePortLID 11
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c3 | +80 PrimaryLocalPortGID
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 d4 e5 f6 | +96 PrimaryRemotePortGID
  12 34 5                 | +112 PrimaryFlowLabel 0x12345 (20 bits)
         0 10             | +114.4 reserved 6 bits, +115.2 PrimaryPacketRate 16
  20                      | +116 PrimaryTrafficClass 0x20
  01                      | +117 PrimaryHopLimit 1
  98                      | +118 PrimarySL 9, PrimarySubnetLocal 1, reserved
  70                      | +119 PrimaryLocalACKTimeout 14, reserved
  00 0c 00 0d             | +120 AlternateLocalPortLID 12, AlternateRemotePortLID 13
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c4 | +124 AlternateLocalPortGID
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 d4 e5 f7 | +140 AlternateRemotePortGID
  ab cd e                 | +156 AlternateFlowLabel 0xabcde
         0 03             | +158.4 reserved, +159.2 AlternatePacketRate 3
  04                      | +160 AlternateTrafficClass 4
  02                      | +161 AlternateHopLimit 2
  20                      | +162 AlternateSL 2, AlternateSubnetLocal 0, reserved
  9c                      | +163 AlternateLocalACKTimeout 19, SAPSupported 1, reserved
  43 4d 41 21             | +164 PrivateData "CMA!" (then zeros)
)");

Gid G(const char* text) { return *Gid::Parse(text); }

ReqRepr GoldenRepr() {
  ReqRepr r;
  r.envelope.transaction_id = 0x00000002aabbccdd;
  r.local_comm_id = 0x11223344;
  r.ece = {0x02c903, 5};
  r.service_id = 0x0000000001061d2f;
  r.local_ca_guid = 0x0002c90300a1b2c3;
  r.local_qkey = 0xabcd;
  r.local_qpn = 0x123;
  r.responder_resources = 4;
  r.local_eecn = 0x456;
  r.initiator_depth = 8;
  r.remote_eecn = 0x789;
  r.remote_cm_response_timeout = 20;
  r.transport_service = TransportService::kExtended;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0x123456;
  r.local_cm_response_timeout = 18;
  r.retry_count = 7;
  r.partition_key = 0xffff;
  r.path_mtu = PathMtu::k4096;
  r.rdc_exists = true;
  r.rnr_retry_count = 6;
  r.max_cm_retries = 15;
  r.srq = true;
  r.extended_transport = ExtendedTransport::kXrc;
  r.primary = {10, 11, G("fe80::2:c903:a1:b2c3"), G("fe80::2:c903:d4:e5f6"), 0x12345, 16,
               0x20, 1, 9, true, 14};
  r.alternate = CmPath{12, 13, G("fe80::2:c903:a1:b2c4"), G("fe80::2:c903:d4:e5f7"),
                       0xabcde, 3, 4, 2, 2, false, 19};
  r.sap_supported = true;
  const uint8_t pd[4] = {'C', 'M', 'A', '!'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(ReqTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok()) << GoldenRepr().Emit(buf);
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenReq.begin()))
      << DiffBytes(buf, kGoldenReq);
}

TEST(ReqTest, ParseGolden) {
  auto r = ReqRepr::Parse(kGoldenReq);
  ASSERT_TRUE(r.ok()) << r.status();
  ReqRepr want = GoldenRepr();
  want.private_data = PrivateData(std::span(kGoldenReq).subspan(164, 92));
  EXPECT_EQ(*r, want);
  EXPECT_EQ(r->private_data.size(), req::kPrivateDataBytes);  // no length on the wire
  EXPECT_EQ(r->ece.vendor_id, 0x02c903u);
  EXPECT_EQ(r->ece.options, 5u);
  EXPECT_EQ(r->envelope.attribute_modifier, 0u);
  EXPECT_EQ(r->primary.flow_label, 0x12345u);
  EXPECT_EQ(r->primary.packet_rate, 16);
  ASSERT_TRUE(r->alternate.has_value());
  EXPECT_EQ(r->alternate->sl, 2);
  EXPECT_EQ(PathMtuBytes(r->path_mtu), 4096);
}

TEST(ReqTest, TruncationErrorAtEveryPrefix) {
  const std::vector<FieldSpan> body = {
      {"LocalCommID", 24, 27},
      {"reserved", 28, 28},
      {"VendorID", 29, 31},
      {"ServiceID", 32, 39},
      {"LocalCAGUID", 40, 47},
      {"reserved", 48, 51},
      {"LocalQKey", 52, 55},
      {"LocalQPN", 56, 58},
      {"ResponderResources", 59, 59},
      {"LocalEECN", 60, 62},
      {"InitiatorDepth", 63, 63},
      {"RemoteEECN", 64, 66},
      {"RemoteCMResponseTimeout", 67, 67},
      {"StartingPSN", 68, 70},
      {"LocalCMResponseTimeout", 71, 71},
      {"PartitionKey", 72, 73},
      {"PathPacketPayloadMTU", 74, 74},
      {"MaxCMRetries", 75, 75},
      {"PrimaryLocalPortLID", 76, 77},
      {"PrimaryRemotePortLID", 78, 79},
      {"PrimaryLocalPortGID", 80, 95},
      {"PrimaryRemotePortGID", 96, 111},
      {"PrimaryFlowLabel", 112, 114},
      {"reserved", 114, 115},
      {"PrimaryTrafficClass", 116, 116},
      {"PrimaryHopLimit", 117, 117},
      {"PrimarySL", 118, 118},
      {"PrimaryLocalACKTimeout", 119, 119},
      {"AlternateLocalPortLID", 120, 121},
      {"AlternateRemotePortLID", 122, 123},
      {"AlternateLocalPortGID", 124, 139},
      {"AlternateRemotePortGID", 140, 155},
      {"AlternateFlowLabel", 156, 158},
      {"reserved", 158, 159},
      {"AlternateTrafficClass", 160, 160},
      {"AlternateHopLimit", 161, 161},
      {"AlternateSL", 162, 162},
      {"AlternateLocalACKTimeout", 163, 163},
      {"PrivateData", 164, 255},
  };
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return ReqRepr::Parse(b).status(); }, "REQ", kGoldenReq,
      body);
}

TEST(ReqTest, RejectsWrongHeader) {
  auto bad = kGoldenReq;
  bad[17] = 0x13;  // REP
  EXPECT_EQ(ReqRepr::Parse(bad).status().message(),
            "REQ: MAD.AttributeID = 0x0013, expected 0x0010");
  bad = kGoldenReq;
  bad[3] = 0x81;
  EXPECT_THAT(ReqRepr::Parse(bad).status().message(), HasSubstr("MAD.Method = 0x81"));
  bad = kGoldenReq;
  bad[2] = 0x01;
  EXPECT_THAT(ReqRepr::Parse(bad).status().message(), HasSubstr("version 1 is not CM"));
}

TEST(ReqTest, ReservedMtuIsRejectedNamingTheField) {
  for (uint8_t mtu : {0, 6, 15}) {
    auto bad = kGoldenReq;
    bad[74] = static_cast<uint8_t>((bad[74] & 0x0F) | mtu << 4);
    EXPECT_EQ(ReqRepr::Parse(bad).status().message(),
              absl::StrCat("REQ.PathPacketPayloadMTU = ", mtu,
                           " is reserved (valid: 1=256 .. 5=4096)"));
  }
  ReqRepr r = GoldenRepr();
  r.path_mtu = static_cast<PathMtu>(7);
  auto buf = testing::Poisoned();
  EXPECT_THAT(r.Emit(buf).message(), HasSubstr("PathPacketPayloadMTU = 7 is reserved"));
}

TEST(ReqTest, UnknownTransportValuesSurvive) {
  auto in = kGoldenReq;
  in[67] = (in[67] & ~0x06) | (2 << 1);  // RD
  in[75] = (in[75] & ~0x07) | 5;         // undefined extended transport type
  auto r = ReqRepr::Parse(in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->transport_service, TransportService::kRd);
  EXPECT_STREQ(TransportServiceName(r->transport_service), "RD");
  EXPECT_EQ(static_cast<int>(r->extended_transport), 5);
  auto out = testing::Poisoned();
  ASSERT_TRUE(r->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << DiffBytes(out, in);
}

TEST(ReqTest, ReservedBitsAreIgnoredOnParseAndZeroedOnEmit) {
  auto in = kGoldenReq;
  in[28] = 0xff;   // reserved byte before VendorID
  in[48] = 0x55;   // reserved word
  in[115] |= 0xC0; // reserved bits before the primary packet rate
  in[163] |= 0x03; // reserved bits after SAPSupported
  auto r = ReqRepr::Parse(in);
  ASSERT_TRUE(r.ok()) << r.status();
  auto out = testing::Poisoned();
  ASSERT_TRUE(r->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), kGoldenReq.begin()))
      << DiffBytes(out, kGoldenReq);
}

TEST(ReqTest, AbsentAlternateIsAllZero) {
  ReqRepr r = GoldenRepr();
  r.alternate.reset();
  auto buf = testing::Poisoned();
  ASSERT_TRUE(r.Emit(buf).ok());
  for (int i = 120; i < 163; ++i) EXPECT_EQ(buf[i], 0) << i;
  EXPECT_EQ(buf[163], 0x04);  // only SAPSupported
  auto back = ReqRepr::Parse(buf);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->alternate.has_value());

  // Any alternate bit makes it present, even with both LIDs 0 (Linux would
  // look at AlternateLocalPortLID only).
  buf[131] = 0x01;
  back = ReqRepr::Parse(buf);
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(back->alternate.has_value());
  EXPECT_EQ(back->alternate->local_lid, 0);

  r.alternate = CmPath{};
  EXPECT_THAT(r.Emit(buf).message(), HasSubstr("alternate path is present but all zero"));
}

TEST(ReqTest, EceOptionsLiveInEceNotTheEnvelope) {
  ReqRepr r = GoldenRepr();
  r.envelope.attribute_modifier = 5;
  auto buf = testing::Poisoned();
  EXPECT_THAT(r.Emit(buf).message(), HasSubstr("set ece.options instead"));
  r = GoldenRepr();
  r.ece.vendor_id = 0x1000000;
  EXPECT_EQ(r.Emit(buf).message(), "REQ.VendorID = 16777216 does not fit in 24 bits (max 16777215)");
}

TEST(ReqTest, OutOfRangeValuesAreRejectedNotMasked) {
  ReqRepr r = GoldenRepr();
  r.retry_count = 9;
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "REQ.RetryCount = 9 does not fit in 3 bits (max 7)");
  r = GoldenRepr();
  r.primary.flow_label = 0x100000;
  EXPECT_EQ(r.Emit(buf).message(),
            "REQ.PrimaryFlowLabel = 1048576 does not fit in 20 bits (max 1048575)");
  r = GoldenRepr();
  r.alternate->sl = 16;
  EXPECT_EQ(r.Emit(buf).message(), "REQ.AlternateSL = 16 does not fit in 4 bits (max 15)");
}

TEST(ReqTest, PrivateDataLimitIsStated) {
  ReqRepr r = GoldenRepr();
  const std::vector<uint8_t> big(93, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "REQ private data is 93 bytes; REQ carries at most 92");
  r.private_data = PrivateData(std::span(big).first(92));
  EXPECT_TRUE(r.Emit(buf).ok());
}

TEST(ReqTest, ShortOutputBufferIsAnError) {
  std::array<uint8_t, 255> small;
  EXPECT_EQ(GoldenRepr().Emit(small).message(),
            "REQ: output buffer is 255 bytes; a MAD needs 256");
}

ReqRepr RandomReq(std::mt19937_64& rng) {
  ReqRepr r;
  r.envelope = testing::RandomEnvelope(rng, false);
  r.local_comm_id = static_cast<uint32_t>(rng());
  r.ece = {static_cast<uint32_t>(rng() & 0xFFFFFF), static_cast<uint32_t>(rng())};
  r.service_id = rng();
  r.local_ca_guid = rng();
  r.local_qkey = static_cast<uint32_t>(rng());
  r.local_qpn = rng() & 0xFFFFFF;
  r.responder_resources = static_cast<uint8_t>(rng());
  r.local_eecn = rng() & 0xFFFFFF;
  r.initiator_depth = static_cast<uint8_t>(rng());
  r.remote_eecn = rng() & 0xFFFFFF;
  r.remote_cm_response_timeout = rng() & 0x1F;
  r.transport_service = static_cast<TransportService>(rng() & 3);
  r.end_to_end_flow_control = rng() & 1;
  r.starting_psn = rng() & 0xFFFFFF;
  r.local_cm_response_timeout = rng() & 0x1F;
  r.retry_count = rng() & 7;
  r.partition_key = static_cast<uint16_t>(rng());
  r.path_mtu = static_cast<PathMtu>(1 + rng() % 5);
  r.rdc_exists = rng() & 1;
  r.rnr_retry_count = rng() & 7;
  r.max_cm_retries = rng() & 0xF;
  r.srq = rng() & 1;
  r.extended_transport = static_cast<ExtendedTransport>(rng() & 7);
  r.primary = testing::RandomPath(rng);
  if (rng() & 1) r.alternate = testing::RandomPath(rng);
  r.sap_supported = rng() & 1;
  r.private_data = testing::RandomPrivateData(rng, req::kPrivateDataBytes);
  return r;
}

TEST(ReqTest, RandomRoundTrip) {
  std::mt19937_64 rng(10);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    const ReqRepr r = RandomReq(rng);
    ASSERT_TRUE(r.Emit(buf).ok()) << r.Emit(buf);
    auto back = ReqRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
