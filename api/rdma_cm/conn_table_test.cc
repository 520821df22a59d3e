#include "api/rdma_cm/conn_table.h"

#include "gtest/gtest.h"

namespace uscm {
namespace {

cm::ConnId Id(uint32_t index, uint32_t generation) {
  cm::ConnId c;
  c.index = index;
  c.generation = generation;
  return c;
}

TEST(ConnTableTest, FindsBySlotAndGeneration) {
  ConnTable<int> t;
  int a = 1, b = 2;
  EXPECT_EQ(t.Find(Id(0, 1)), nullptr);
  EXPECT_EQ(t.Find(cm::ConnId()), nullptr);  // invalid: index UINT32_MAX
  t.Set(Id(0, 1), &a);
  t.Set(Id(700, 3), &b);  // a third chunk
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Find(Id(0, 1)), &a);
  EXPECT_EQ(t.Find(Id(700, 3)), &b);
  EXPECT_EQ(t.Find(Id(0, 2)), nullptr);    // the slot's next generation
  EXPECT_EQ(t.Find(Id(700, 0)), nullptr);  // generation 0 is never valid
  EXPECT_EQ(t.Find(Id(300, 1)), nullptr);  // a chunk made, the entry not set
  EXPECT_TRUE(t.contains(Id(0, 1)));
  EXPECT_FALSE(t.contains(Id(1, 1)));
}

TEST(ConnTableTest, AReusedSlotHidesTheOldGenerationAndErasingItLeavesTheNew) {
  ConnTable<int> t;
  int old_id = 1, new_id = 2;
  t.Set(Id(5, 1), &old_id);
  t.Set(Id(5, 2), &new_id);  // the CM freed slot 5 and reused it
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.Find(Id(5, 1)), nullptr);
  t.Erase(Id(5, 1));  // late erase of the old connection
  EXPECT_EQ(t.Find(Id(5, 2)), &new_id);
  EXPECT_EQ(t.size(), 1u);
  t.Erase(Id(5, 2));
  EXPECT_EQ(t.Find(Id(5, 2)), nullptr);
  EXPECT_EQ(t.size(), 0u);
  t.Erase(Id(5, 2));  // twice: nothing
  t.Erase(Id(9999, 1));  // beyond every chunk: nothing
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace uscm
