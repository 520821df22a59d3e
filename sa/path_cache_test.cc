#include "sa/path_cache.h"

#include "gtest/gtest.h"

namespace uscm::sa {
namespace {

using mad::Duration;
using mad::TimePoint;

TimePoint At(int64_t s) { return TimePoint::Epoch() + Duration::Seconds(s); }

PathCacheKey Key(uint64_t s, uint64_t d) {
  PathCacheKey k;
  k.sgid = mad::Gid::FromParts(0xfe80000000000000ULL, s);
  k.dgid = mad::Gid::FromParts(0xfe80000000000000ULL, d);
  return k;
}

mad::wire::PathRecord Path(uint16_t dlid) {
  mad::wire::PathRecord p;
  p.dlid = dlid;
  return p;
}

TEST(PathCacheTest, HitUntilExpiry) {
  PathCache c;
  EXPECT_FALSE(c.Lookup(At(0), Key(1, 2)).has_value());
  c.Insert(At(0), Key(1, 2), Path(7), Duration::Seconds(10));
  auto hit = c.Lookup(At(9), Key(1, 2));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->dlid, 7);
  EXPECT_FALSE(c.Lookup(At(10), Key(1, 2)).has_value());
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.counters().hits, 1u);
  EXPECT_EQ(c.counters().misses, 2u);
  EXPECT_EQ(c.counters().expired, 1u);
}

TEST(PathCacheTest, KeyFieldsAllMatter) {
  PathCache c;
  c.Insert(At(0), Key(1, 2), Path(7), Duration::Seconds(10));
  PathCacheKey k = Key(1, 2);
  k.pkey = 0x8001;
  EXPECT_FALSE(c.Lookup(At(0), k).has_value());
  k = Key(1, 2);
  k.service_id = 5;
  EXPECT_FALSE(c.Lookup(At(0), k).has_value());
  k = Key(1, 2);
  k.sl = 3;
  EXPECT_FALSE(c.Lookup(At(0), k).has_value());
  EXPECT_FALSE(c.Lookup(At(0), Key(2, 1)).has_value());
}

TEST(PathCacheTest, InvalidateByEitherGidAndClear) {
  PathCache c;
  c.Insert(At(0), Key(1, 2), Path(1), Duration::Seconds(10));
  c.Insert(At(0), Key(2, 3), Path(2), Duration::Seconds(10));
  c.Insert(At(0), Key(3, 4), Path(3), Duration::Seconds(10));
  EXPECT_EQ(c.InvalidateGid(Key(2, 2).sgid), 2u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_TRUE(c.Lookup(At(0), Key(3, 4)).has_value());
  c.Clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.counters().invalidated, 3u);
}

TEST(PathCacheTest, FullCacheDropsExpiredThenSoonestToExpire) {
  PathCache c(2);
  c.Insert(At(0), Key(1, 2), Path(1), Duration::Seconds(5));
  c.Insert(At(0), Key(1, 3), Path(2), Duration::Seconds(50));
  c.Insert(At(1), Key(1, 4), Path(3), Duration::Seconds(50));  // evicts (1,2)
  EXPECT_EQ(c.size(), 2u);
  EXPECT_FALSE(c.Lookup(At(1), Key(1, 2)).has_value());
  EXPECT_EQ(c.counters().evicted, 1u);
  c.Insert(At(60), Key(1, 5), Path(4), Duration::Seconds(50));  // both expired
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.counters().expired, 2u);
}

}  // namespace
}  // namespace uscm::sa
