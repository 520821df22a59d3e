#include "mad/capture/ib_packet.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/ib_crc.h"

namespace uscm::mad::capture {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<uint8_t> CountingMad(size_t n = kMadSize) {
  std::vector<uint8_t> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<uint8_t>(i);
  return m;
}

UdHeaders Sample() {
  UdHeaders h;
  h.sl = 5;
  h.dlid = 0x22;
  h.slid = 0x11;
  h.pkey = 0x8001;
  h.psn = 0x123456;
  return h;
}

GrhFields SampleGrh() {
  return GrhFields{.sgid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3),
                   .dgid = Gid::FromParts(0xfe80000000000000, 0x0002c90300d4e5f6),
                   .traffic_class = 0x20,
                   .flow_label = 0x12345,
                   .hop_limit = 0x40};
}

std::vector<uint8_t> Slice(const std::vector<uint8_t>& v, size_t at, size_t n) {
  return {v.begin() + at, v.begin() + at + n};
}

TEST(IbPacketTest, WrapsLrhBthDethMadIcrcVcrc) {
  const std::vector<uint8_t> mad = CountingMad();
  absl::StatusOr<std::vector<uint8_t>> p = WrapMad(Sample(), mad);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 8u + 12 + 8 + 256 + 4 + 2);
  EXPECT_THAT(Slice(*p, 0, 8), ElementsAre(0x00,        // VL 0, LVer 0
                                           0x52,        // SL 5, LNH 2 (BTH)
                                           0x00, 0x22,  // DLID
                                           0x00, 72,    // PktLen: 288 bytes / 4
                                           0x00, 0x11)); // SLID
  EXPECT_THAT(Slice(*p, 8, 12), ElementsAre(0x64,              // UD SEND_ONLY
                                            0x00,              // SE M PadCnt TVer
                                            0x80, 0x01,        // P_Key
                                            0x00,              // Resv8a
                                            0x00, 0x00, 0x01,  // DestQP
                                            0x00,              // A, reserved
                                            0x12, 0x34, 0x56));  // PSN
  EXPECT_THAT(Slice(*p, 20, 8), ElementsAre(0x80, 0x01, 0x00, 0x00,  // Q_Key
                                            0x00,                    // reserved
                                            0x00, 0x00, 0x01));      // SrcQP
  EXPECT_THAT(Slice(*p, 28, 256), ElementsAreArray(mad));
  // ICRC from Python's zlib.crc32(b"\xff"*8 + BTH(Resv8a=0xff) + DETH + MAD),
  // stored least-significant byte first.
  EXPECT_THAT(Slice(*p, 284, 4), ElementsAre(0x6a, 0x76, 0x86, 0x8a));
  const uint16_t vcrc = Vcrc16(std::span<const uint8_t>(*p).first(288));
  EXPECT_THAT(Slice(*p, 288, 2), ElementsAre(vcrc & 0xFF, vcrc >> 8));
}

TEST(IbPacketTest, WrapsGrh) {
  UdHeaders h = Sample();
  h.grh = SampleGrh();
  absl::StatusOr<std::vector<uint8_t>> p = WrapMad(h, CountingMad());
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 8u + 40 + 12 + 8 + 256 + 4 + 2);
  EXPECT_EQ((*p)[1], 0x53);                              // LNH 3
  EXPECT_THAT(Slice(*p, 4, 2), ElementsAre(0x00, 82));   // PktLen
  EXPECT_THAT(Slice(*p, 8, 8), ElementsAre(0x62, 0x01, 0x23, 0x45,  // IPVer TClass FL
                                           0x01, 0x18,   // PayLen 280
                                           0x1b,         // NxtHdr IBA
                                           0x40));       // HopLmt
  EXPECT_THAT(Slice(*p, 16, 16), ElementsAreArray(h.grh->sgid.raw));
  EXPECT_THAT(Slice(*p, 32, 16), ElementsAreArray(h.grh->dgid.raw));
  EXPECT_EQ((*p)[48], 0x64);  // BTH after the GRH
  // ICRC from Python's zlib.crc32 over 8 x 0xff, the GRH with TClass,
  // FlowLabel and HopLmt set to 1s, BTH (Resv8a 0xff), DETH and MAD.
  EXPECT_THAT(Slice(*p, 324, 4), ElementsAre(0x56, 0xd2, 0x98, 0x30));
}

TEST(IbPacketTest, RoundTripsWithAndWithoutGrhAndPadding) {
  for (bool grh : {false, true}) {
    for (size_t n : {256u, 253u, 254u, 255u, 4u, 1u}) {
      UdHeaders h = Sample();
      h.vl = 3;
      h.dest_qpn = 0xABCDEF;
      h.src_qpn = 0x123456;
      h.qkey = 0x11223344;
      if (grh) h.grh = SampleGrh();
      const std::vector<uint8_t> mad = CountingMad(n);
      absl::StatusOr<std::vector<uint8_t>> p = WrapMad(h, mad);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->size() % 2, 0u);
      absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(*p);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(parsed->headers, h);
      EXPECT_THAT(std::vector<uint8_t>(parsed->mad.begin(), parsed->mad.end()),
                  ElementsAreArray(mad));
      EXPECT_EQ(parsed->mad_offset, HeadersSize(h));
      EXPECT_EQ(parsed->pad_count, (4 - n % 4) % 4);
      EXPECT_TRUE(parsed->icrc_ok);
      EXPECT_TRUE(parsed->has_vcrc);
      EXPECT_TRUE(parsed->vcrc_ok);
    }
  }
}

TEST(IbPacketTest, IcrcIgnoresVariantFieldsAndCoversInvariantOnes) {
  UdHeaders base = Sample();
  base.grh = SampleGrh();
  const uint32_t icrc = ParseUdPacket(*WrapMad(base, CountingMad()))->icrc;
  auto icrc_of = [](const UdHeaders& h) {
    return ParseUdPacket(*WrapMad(h, CountingMad()))->icrc;
  };
  UdHeaders v = base;  // variant: LRH, GRH TClass/FlowLabel/HopLmt
  v.vl = 7;
  v.sl = 1;
  v.dlid = 0x99;
  v.slid = 0x98;
  v.grh->traffic_class = 0xFF;
  v.grh->flow_label = 0xFFFFF;
  v.grh->hop_limit = 1;
  EXPECT_EQ(icrc_of(v), icrc);
  for (auto change : std::vector<void (*)(UdHeaders&)>{
           [](UdHeaders& h) { h.pkey = 0x7FFF; },
           [](UdHeaders& h) { h.qkey = 0; },
           [](UdHeaders& h) { h.dest_qpn = 2; },
           [](UdHeaders& h) { h.psn = 1; },
           [](UdHeaders& h) { h.grh->dgid.raw[15] ^= 1; },
           [](UdHeaders& h) { h.grh->sgid.raw[0] ^= 1; }}) {
    UdHeaders h = base;
    change(h);
    EXPECT_NE(icrc_of(h), icrc);
  }
  // Resv8a is variant too: flipping it in the bytes keeps the ICRC valid.
  std::vector<uint8_t> p = *WrapMad(base, CountingMad());
  p[8 + 40 + 4] = 0x5A;
  EXPECT_TRUE(ParseUdPacket(p)->icrc_ok);
}

TEST(IbPacketTest, CorruptCrcsAreReportedNotRejected) {
  std::vector<uint8_t> p = *WrapMad(Sample(), CountingMad());
  p[100] ^= 0x01;  // inside the MAD
  absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(p);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->icrc_ok);
  EXPECT_FALSE(parsed->vcrc_ok);
  p[100] ^= 0x01;
  p[2] ^= 0x01;  // DLID: variant, so only the VCRC notices
  parsed = ParseUdPacket(p);
  EXPECT_TRUE(parsed->icrc_ok);
  EXPECT_FALSE(parsed->vcrc_ok);
}

TEST(IbPacketTest, AcceptsCapturesWithoutVcrc) {
  std::vector<uint8_t> p = *WrapMad(Sample(), CountingMad());
  p.erase(p.end() - kVcrcSize, p.end());
  absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(p);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->has_vcrc);
  EXPECT_TRUE(parsed->icrc_ok);
}

TEST(IbPacketTest, EveryTruncationIsAnError) {
  for (bool grh : {false, true}) {
    UdHeaders h = Sample();
    if (grh) h.grh = SampleGrh();
    const std::vector<uint8_t> p = *WrapMad(h, CountingMad());
    for (size_t n = 0; n < p.size(); ++n) {
      if (n == p.size() - kVcrcSize) continue;  // a capture without VCRC
      absl::StatusOr<ParsedUdPacket> parsed =
          ParseUdPacket(std::span<const uint8_t>(p).first(n));
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << n;
    }
  }
}

std::string ErrorAfter(void (*corrupt)(std::vector<uint8_t>&), bool grh = false) {
  UdHeaders h = Sample();
  if (grh) h.grh = SampleGrh();
  std::vector<uint8_t> p = *WrapMad(h, CountingMad());
  corrupt(p);
  absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(p);
  return parsed.ok() ? "ok" : std::string(parsed.status().message());
}

TEST(IbPacketTest, NamesTheBadField) {
  EXPECT_THAT(ErrorAfter([](auto& p) { p[0] |= 1; }), HasSubstr("LRH LVer is 1"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[1] &= 0xF0; }), HasSubstr("LRH LNH is 0 (raw)"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[5] = 73; }), HasSubstr("LRH PktLen says 292"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[5] = 71; }), HasSubstr("6 bytes after the ICRC"));
  EXPECT_THAT(ErrorAfter([](auto& p) {
                p.erase(p.begin() + 12, p.end());
                p[5] = 3;
              }),
              HasSubstr("headers and ICRC alone need 8"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p.push_back(0); }), HasSubstr("3 bytes after"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[8] = 0x04; }), HasSubstr("BTH OpCode is 0x04"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[9] = 0x01; }), HasSubstr("BTH TVer is 1"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[8] = 0x40; }, true), HasSubstr("GRH IPVer is 4"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[14] = 0x11; }, true), HasSubstr("GRH NxtHdr is 0x11"));
  EXPECT_THAT(ErrorAfter([](auto& p) { p[13] = 0x17; }, true), HasSubstr("GRH PayLen is 279"));
}

TEST(IbPacketTest, PadCountShortensTheMad) {
  std::vector<uint8_t> p = *WrapMad(Sample(), CountingMad());
  p[9] = 0x30;  // PadCnt 3: the last 3 payload bytes are padding
  absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(p);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->mad.size(), 253u);
  EXPECT_FALSE(parsed->icrc_ok);

  // A packet whose payload is nothing but padding carries no MAD.
  p = *WrapMad(Sample(), CountingMad(1));
  ASSERT_EQ(p.size(), 28u + 4 + 6);
  p.erase(p.begin() + 28, p.begin() + 32);
  p[5] = 8;  // PktLen: 32 bytes through the ICRC
  parsed = ParseUdPacket(p);
  EXPECT_THAT(parsed.status().message(), HasSubstr("0 payload bytes with BTH PadCnt 3"));
}

TEST(IbPacketTest, WrapRejectsOutOfRangeFields) {
  auto err = [](void (*f)(UdHeaders&), size_t n = kMadSize) {
    UdHeaders h = Sample();
    h.grh = SampleGrh();
    f(h);
    absl::StatusOr<std::vector<uint8_t>> p = WrapMad(h, CountingMad(n));
    return p.ok() ? "ok" : std::string(p.status().message());
  };
  EXPECT_EQ(err([](UdHeaders& h) { h.sl = 16; }), "LRH SL is 0x10; the field holds at most 0xf");
  EXPECT_THAT(err([](UdHeaders& h) { h.vl = 16; }), HasSubstr("LRH VL"));
  EXPECT_THAT(err([](UdHeaders& h) { h.dest_qpn = 1 << 24; }), HasSubstr("BTH DestQP"));
  EXPECT_THAT(err([](UdHeaders& h) { h.src_qpn = 1 << 24; }), HasSubstr("DETH SrcQP"));
  EXPECT_THAT(err([](UdHeaders& h) { h.psn = 1 << 24; }), HasSubstr("BTH PSN"));
  EXPECT_THAT(err([](UdHeaders& h) { h.grh->flow_label = 1 << 20; }),
              HasSubstr("GRH FlowLabel"));
  EXPECT_EQ(err([](UdHeaders&) {}, 0), "MAD is empty");
  EXPECT_THAT(err([](UdHeaders&) {}, 8117), HasSubstr("carries at most 8116"));
  EXPECT_EQ(err([](UdHeaders&) {}, 8116), "ok");
}

TEST(IbPacketTest, HeadersFromTransportAddresses) {
  LocalPort port;
  port.lid = 0x40;
  port.gid = Gid::FromParts(0xfe80000000000000, 0x1111);
  port.pkeys = {0xFFFF, 0x8005};
  MadAddress peer;
  peer.lid = 0x22;
  peer.qpn = 0x77;
  peer.qkey = 0x1234;
  peer.pkey_index = 1;
  peer.sl = 3;
  peer.path_bits = 2;
  peer.has_grh = true;
  peer.gid = Gid::FromParts(0xfe80000000000000, 0x2222);
  peer.hop_limit = 9;
  peer.traffic_class = 4;
  peer.flow_label = 0x321;

  const UdHeaders out = OutgoingHeaders(port, peer);
  EXPECT_EQ(out.slid, 0x42);
  EXPECT_EQ(out.dlid, 0x22);
  EXPECT_EQ(out.sl, 3);
  EXPECT_EQ(out.pkey, 0x8005);
  EXPECT_EQ(out.dest_qpn, 0x77u);
  EXPECT_EQ(out.src_qpn, kQp1);
  EXPECT_EQ(out.qkey, 0x1234u);
  ASSERT_TRUE(out.grh.has_value());
  EXPECT_EQ(out.grh->sgid, port.gid);
  EXPECT_EQ(out.grh->dgid, peer.gid);
  EXPECT_EQ(out.grh->hop_limit, 9);

  const UdHeaders in = IncomingHeaders(port, peer);
  EXPECT_EQ(in.slid, 0x22);
  EXPECT_EQ(in.dlid, 0x42);
  EXPECT_EQ(in.src_qpn, 0x77u);
  EXPECT_EQ(in.dest_qpn, kQp1);
  EXPECT_EQ(in.grh->sgid, peer.gid);
  EXPECT_EQ(in.grh->dgid, port.gid);

  MadAddress back = SourceAddress(in);
  back.pkey_index = peer.pkey_index;  // a packet carries the P_Key, not the index
  back.path_bits = peer.path_bits;    // nor the receiver's path bits
  EXPECT_EQ(back, peer);

  peer.pkey_index = 9;  // not in the table
  EXPECT_EQ(OutgoingHeaders(port, peer).pkey, 0xFFFF);
}

}  // namespace
}  // namespace uscm::mad::capture
