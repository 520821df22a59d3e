#include "mad/wire/service_record.h"

#include <algorithm>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/sa_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::Hex;

// Golden ServiceRecord registration (SubnAdmSet), commented field by field.
const std::vector<uint8_t> kGoldenMad = Hex(R"(
  01 03 02 02   | BaseVersion 1, class SA, version 2, Set
  00 00 00 00   | Status, ClassSpecific
  00 00 00 00 00 00 30 03 | TransactionID
  00 31 00 00   | AttributeID ServiceRecord, reserved
  00 00 00 00   | AttributeModifier
  00 00 00 00 00 00 00 00 00 00 00 00 | +24 RMPP header: not in use
  00 00 00 00 00 00 00 00 | +36 SM_Key
  00 00 00 00   | +44 AttributeOffset 0, reserved
  00 00 00 00 00 80 00 d7 | +48 ComponentMask: bits 0 1 2 4 6 (ID GID P_Key Lease Name), 7 (ServiceData8[0]), 23 (ServiceData16[0])
  10 00 00 00 00 00 00 01 | +56 ServiceID
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c3 | +64 ServiceGID
  ff ff 00 00   | +80 ServiceP_Key 0xffff, reserved
  ff ff ff ff   | +84 ServiceLease infinite
  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f | +88 ServiceKey
  75 73 63 6d 2d 74 65 73 74 | +104 ServiceName "uscm-test" (NUL-padded to 64)
  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
  aa 00 00 00 00 00 00 00 00 00 00 00 00 00 00 bb | +168 ServiceData8[0] 0xaa, [15] 0xbb
  12 34 00 00 00 00 00 00 00 00 00 00 00 00 56 78 | +184 ServiceData16[0] 0x1234, [7] 0x5678
  89 ab cd ef 00 00 00 00 00 00 00 00 00 00 00 01 | +200 ServiceData32[0], [3] = 1
  01 02 03 04 05 06 07 08 00 00 00 00 00 00 00 09 | +216 ServiceData64[0], [1] = 9
)");

ServiceRecord GoldenRecord() {
  ServiceRecord r;
  r.service_id = 0x1000000000000001;
  r.service_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3);
  r.service_pkey = 0xffff;
  r.service_lease = kServiceLeaseInfinite;
  for (int i = 0; i < 16; ++i) r.service_key[i] = static_cast<uint8_t>(i);
  EXPECT_TRUE(r.set_name("uscm-test").ok());
  r.service_data8[0] = 0xaa;
  r.service_data8[15] = 0xbb;
  r.service_data16 = {0x1234, 0, 0, 0, 0, 0, 0, 0x5678};
  r.service_data32 = {0x89abcdef, 0, 0, 1};
  r.service_data64 = {0x0102030405060708, 9};
  return r;
}

ServiceRecordMad GoldenMad() {
  ServiceRecordMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kSet);
  m.envelope.transaction_id = 0x3003;
  using M = ServiceRecordMask;
  m.component_mask = M::kServiceId | M::kServiceGid | M::kServicePKey | M::kServiceLease |
                     M::kServiceName | M::ServiceData8(0) | M::ServiceData16(0);
  m.record = GoldenRecord();
  return m;
}

const std::vector<testing::Cut> kCuts = {
    {8, "ServiceID", 0},       {24, "ServiceGID", 8},     {26, "ServiceP_Key", 24},
    {28, "reserved", 26},      {32, "ServiceLease", 28},  {48, "ServiceKey", 32},
    {112, "ServiceName", 48},  {128, "ServiceData8", 112}, {144, "ServiceData16", 128},
    {160, "ServiceData32", 144}, {176, "ServiceData64", 160},
};

TEST(ServiceRecordTest, MaskBitsAsOpenSm) {
  EXPECT_EQ(GoldenMad().component_mask.bits(), 0x00000000008000d7u);
  EXPECT_THAT(GoldenMad().component_mask.Names(),
              ElementsAre("ServiceID", "ServiceGID", "ServiceP_Key", "ServiceLease",
                          "ServiceName", "ServiceData8[0]", "ServiceData16[0]"));
  EXPECT_EQ(ServiceRecordMask::ServiceData64(1).bits(), uint64_t{1} << 36);
  EXPECT_EQ(ServiceRecordMask::ServiceData32(0).bits(), uint64_t{1} << 31);
  EXPECT_TRUE(ServiceRecordMask::ServiceData8(16).empty());  // out of range: no bit
  EXPECT_THAT(ServiceRecordMask((uint64_t{1} << 3) | (uint64_t{1} << 37)).Names(),
              ElementsAre("bit3", "bit37"));
}

TEST(ServiceRecordTest, ParseAndEmitGolden) {
  const auto& golden = kGoldenMad;
  auto m = ServiceRecordMad::Parse(golden);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->record, GoldenRecord());
  EXPECT_EQ(m->record.name(), "uscm-test");
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenMad().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), golden.begin())) << DiffBytes(buf, golden);
}

TEST(ServiceRecordTest, TruncationErrorAtEveryPrefix) {
  const auto& golden = kGoldenMad;
  for (size_t n = 0; n < 176; ++n) {
    auto r = ServiceRecord::Parse(std::span(golden).subspan(56, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedCut(kCuts, n, 0, "record")))
        << n;
  }
  for (size_t n = 0; n < golden.size(); ++n) {
    auto r = ServiceRecordMad::Parse(std::span(golden).first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedMadCut(kCuts, 176, n))) << n;
  }
}

TEST(ServiceRecordTest, NameLimitIsStated) {
  ServiceRecord r;
  EXPECT_THAT(r.set_name(std::string(65, 'x')).message(),
              HasSubstr("ServiceRecord.ServiceName is 65 bytes; the field holds 64"));
  ASSERT_TRUE(r.set_name(std::string(64, 'x')).ok());
  EXPECT_EQ(r.name(), std::string(64, 'x'));
}

TEST(ServiceRecordTest, RandomRoundTrip) {
  std::mt19937_64 rng(31);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    ServiceRecordMad m;
    m.envelope = testing::RandomEnvelope(rng, 22);
    m.component_mask = ServiceRecordMask(rng());
    ServiceRecord& r = m.record;
    r.service_id = rng();
    r.service_gid = testing::RandomGid(rng);
    r.service_pkey = static_cast<uint16_t>(rng());
    r.service_lease = static_cast<uint32_t>(rng());
    testing::RandomBytes(rng, r.service_key);
    testing::RandomBytes(rng, r.service_name);
    testing::RandomBytes(rng, r.service_data8);
    for (auto& v : r.service_data16) v = static_cast<uint16_t>(rng());
    for (auto& v : r.service_data32) v = static_cast<uint32_t>(rng());
    for (auto& v : r.service_data64) v = rng();
    ASSERT_TRUE(m.Emit(buf).ok());
    auto back = ServiceRecordMad::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, m);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
