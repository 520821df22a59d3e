#include "cm/slot_map.h"

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

}  // namespace
}  // namespace uscm::cm
