#include "mad/wire/cm_testing.h"

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace uscm::mad::wire::testing {
namespace {

// IBTA Vol 1 Table 145, stated again by hand for the tests.
const FieldSpan kHeaderSpans[] = {
    {"BaseVersion", 0, 0},     {"MgmtClass", 1, 1},    {"ClassVersion", 2, 2},
    {"R", 3, 3},               {"Status", 4, 5},       {"ClassSpecific", 6, 7},
    {"TransactionID", 8, 15},  {"AttributeID", 16, 17}, {"reserved", 18, 19},
    {"AttributeModifier", 20, 23},
};

const FieldSpan* FirstIncomplete(std::span<const FieldSpan> spans, int n) {
  for (const FieldSpan& s : spans) {
    if (s.last >= n) return &s;
  }
  return nullptr;
}

}  // namespace

void ExpectExactTruncationErrors(
    const std::function<absl::Status(std::span<const uint8_t>)>& parse, const char* what,
    std::span<const uint8_t> golden, const std::vector<FieldSpan>& body) {
  ASSERT_EQ(golden.size(), 256u);
  // The spans must tile the body; a typo in a test table would otherwise
  // silently weaken the sweep.
  int next = 24;
  for (const FieldSpan& s : body) {
    ASSERT_TRUE(s.first == next || s.first == next - 1) << s.name << " starts at " << s.first;
    ASSERT_GE(s.last, s.first) << s.name;
    next = std::max(next, s.last + 1);
  }
  ASSERT_EQ(next, 256) << "body spans end at " << next;

  for (int n = 0; n < 256; ++n) {
    const absl::Status st = parse(golden.first(n));
    std::string want;
    if (n < 24) {
      const FieldSpan* f = FirstIncomplete(kHeaderSpans, n);
      want = absl::StrFormat(
          "%s: MAD header truncated: %d of 256 bytes; %s (MAD bytes %d..%d) is incomplete", what,
          n, f->name, f->first, f->last);
    } else {
      const FieldSpan* f = FirstIncomplete(body, n);
      want = absl::StrFormat("%s truncated: %d of 256 bytes; %s (MAD bytes %d..%d) is incomplete",
                             what, n, f->name, f->first, f->last);
    }
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_EQ(st.message(), want) << "prefix " << n;
  }
  EXPECT_TRUE(parse(golden).ok()) << parse(golden);
}

Gid RandomGid(std::mt19937_64& rng) {
  Gid g;
  for (auto& b : g.raw) b = static_cast<uint8_t>(rng());
  return g;
}

CmPath RandomPath(std::mt19937_64& rng) {
  CmPath p;
  p.local_lid = static_cast<uint16_t>(rng());
  p.remote_lid = static_cast<uint16_t>(rng());
  p.local_gid = RandomGid(rng);
  p.remote_gid = RandomGid(rng);
  p.flow_label = rng() & 0xFFFFF;
  p.packet_rate = rng() & 0x3F;
  p.traffic_class = static_cast<uint8_t>(rng());
  p.hop_limit = static_cast<uint8_t>(rng());
  p.sl = rng() & 0xF;
  p.subnet_local = rng() & 1;
  p.local_ack_timeout = rng() & 0x1F;
  return p;
}

CmEnvelope RandomEnvelope(std::mt19937_64& rng, bool with_attribute_modifier) {
  CmEnvelope e;
  e.transaction_id = rng();
  if (with_attribute_modifier) e.attribute_modifier = static_cast<uint32_t>(rng());
  return e;
}

PrivateData RandomPrivateData(std::mt19937_64& rng, size_t capacity) {
  std::vector<uint8_t> b(capacity);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return PrivateData(b);
}

InfoBlock RandomInfoBlock(std::mt19937_64& rng) {
  InfoBlock b;
  b.length = static_cast<uint8_t>(rng() % (InfoBlock::kBytes + 1));
  for (auto& x : b.bytes) x = static_cast<uint8_t>(rng());
  return b;
}

}  // namespace uscm::mad::wire::testing
