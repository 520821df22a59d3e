#include "cm/slot_map.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace uscm::cm {
namespace {

// Values in the first chunk (reached without chunks_) and in later ones are
// found by their keys, keep their addresses as the map grows, and stop
// matching once removed, also after their slot is reused.
TEST(SlotMapTest, KeysAcrossChunksFindTheirValuesUntilRemoved) {
  SlotMap<std::string> m;
  std::vector<SlotMap<std::string>::Key> keys;
  for (int i = 0; i < 700; ++i) keys.push_back(m.Insert(std::to_string(i)));
  const std::string* first = m.Get(keys[0].index, keys[0].generation);
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 700; ++i) {
    const std::string* v = m.Get(keys[i].index, keys[i].generation);
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(*v, std::to_string(i));
    EXPECT_EQ(m.AtIndex(keys[i].index), v);
  }
  for (int i : {3, 255, 256, 600}) {
    EXPECT_TRUE(m.Remove(keys[i].index, keys[i].generation));
    EXPECT_EQ(m.Get(keys[i].index, keys[i].generation), nullptr);
    EXPECT_EQ(m.AtIndex(keys[i].index), nullptr);
  }
  EXPECT_EQ(m.size(), 696u);
  // LIFO reuse: 600's slot first, then 256's, with a new generation.
  auto a = m.Insert("a");
  auto b = m.Insert("b");
  EXPECT_EQ(a.index, keys[600].index);
  EXPECT_EQ(b.index, keys[256].index);
  EXPECT_NE(b.generation, keys[256].generation);
  EXPECT_EQ(*m.Get(b.index, b.generation), "b");
  EXPECT_EQ(m.Get(keys[256].index, keys[256].generation), nullptr);
  EXPECT_EQ(m.Get(keys[0].index, keys[0].generation), first);
  EXPECT_EQ(m.Get(700, 1), nullptr);  // never handed out
  int seen = 0;
  m.ForEach([&](SlotMap<std::string>::Key, std::string&) { ++seen; });
  EXPECT_EQ(seen, 698);
}

// The values live in raw storage beside the slot's generation and live flag
// (not an optional, whose flag comes after the value): each value is
// destroyed once, on Remove or with the map, and never when absent.
struct Counted {
  explicit Counted(int* live) : live(live) { ++*live; }
  Counted(Counted&& o) noexcept : live(o.live) { ++*live; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  ~Counted() { --*live; }
  int* live;
};

TEST(SlotMapTest, ValuesAreDestroyedOnceOnRemoveAndWithTheMap) {
  int live = 0;
  {
    SlotMap<Counted> m;
    std::vector<SlotMap<Counted>::Key> keys;
    for (int i = 0; i < 300; ++i) keys.push_back(m.Insert(Counted(&live)));
    EXPECT_EQ(live, 300);
    EXPECT_TRUE(m.Remove(keys[7].index, keys[7].generation));
    EXPECT_FALSE(m.Remove(keys[7].index, keys[7].generation));
    EXPECT_TRUE(m.Remove(keys[280].index, keys[280].generation));
    EXPECT_EQ(live, 298);
    int seen = 0;
    m.ForEach([&](SlotMap<Counted>::Key, Counted&) { ++seen; });
    EXPECT_EQ(seen, 298);
    m.Insert(Counted(&live));
    EXPECT_EQ(live, 299);
  }
  EXPECT_EQ(live, 0);
}

// A large value's slot starts a cache line, so that the first lines of a
// record (what a lookup reads) do not straddle two.
TEST(SlotMapTest, LargeValuesStartACacheLine) {
  struct Big {
    uint64_t words[25];  // 200 bytes, after the slot's 8-byte header
  };
  SlotMap<Big> m;
  for (int i = 0; i < 3; ++i) {
    auto k = m.Insert(Big{});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.Get(k.index, k.generation)) % 64, 8u);
  }
}

}  // namespace
}  // namespace uscm::cm
