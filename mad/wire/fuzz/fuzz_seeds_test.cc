// Runs every fuzz target's function over the seeds, every prefix of each
// seed, and seeded single-byte mutations of them, so the normal test suite
// exercises the round-trip property the fuzzers check. A failure aborts.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "mad/wire/fuzz/round_trip.h"
#include "mad/wire/fuzz/seeds.h"

namespace uscm::mad::wire::fuzz {
namespace {

using Target = int (*)(const uint8_t*, size_t);

template <typename Repr, const char* kName>
int Call(const uint8_t* d, size_t n) {
  return RoundTrip<Repr>(kName, d, n);
}

constexpr char kReq[] = "REQ", kMra[] = "MRA", kRej[] = "REJ", kRep[] = "REP", kRtu[] = "RTU",
               kDreq[] = "DREQ", kDrep[] = "DREP", kSidrReq[] = "SIDR_REQ",
               kSidrRep[] = "SIDR_REP", kLap[] = "LAP", kApr[] = "APR";

const Target kTargets[] = {
    Call<ReqRepr, kReq>,         Call<MraRepr, kMra>,         Call<RejRepr, kRej>,
    Call<RepRepr, kRep>,         Call<RtuRepr, kRtu>,         Call<DreqRepr, kDreq>,
    Call<DrepRepr, kDrep>,       Call<SidrReqRepr, kSidrReq>, Call<SidrRepRepr, kSidrRep>,
    Call<LapRepr, kLap>,         Call<AprRepr, kApr>,         RoundTripAnyCm,
    RoundTripCmaHeader,
};

TEST(FuzzSeedsTest, EveryTargetOverSeedsPrefixesAndMutations) {
  const auto seeds = Seeds();
  ASSERT_EQ(seeds.size(), 12u);
  std::mt19937_64 rng(22);
  size_t runs = 0;
  for (Target t : kTargets) {
    for (const auto& seed : seeds) {
      for (size_t n = 0; n <= seed.size(); ++n) {
        t(seed.data(), n);
        ++runs;
      }
      for (int i = 0; i < 200; ++i) {
        std::vector<uint8_t> m = seed;
        m[rng() % m.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        t(m.data(), m.size());
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 60000u);
}

TEST(FuzzSeedsTest, EachSampleParsesUnderItsOwnTarget) {
  const auto seeds = Seeds();
  // Seeds 0..10 are REQ .. APR in CmMessage order; check the dispatcher sees
  // each one (so the seeds are real messages, not rejected garbage).
  for (size_t i = 0; i + 1 < seeds.size(); ++i) {
    auto m = ParseAnyCm(seeds[i]);
    ASSERT_TRUE(m.ok()) << i << ": " << m.status();
    EXPECT_EQ(m->index(), i);
  }
  EXPECT_TRUE(CmaHeader::Parse(seeds.back()).ok());
}

}  // namespace
}  // namespace uscm::mad::wire::fuzz
