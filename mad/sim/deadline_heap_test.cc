#include "mad/sim/deadline_heap.h"

#include <cstdint>
#include <random>
#include <set>
#include <tuple>

#include "gtest/gtest.h"

namespace uscm::sim {
namespace {

using Key = std::tuple<int64_t, uint64_t, uint32_t>;  // (at, order, slot): the btree's order

// Random inserts, erases of any present slot and pops, each followed by a
// comparison of the minimum with a std::set of the same keys (what the
// scheduler kept before). Deadlines come from a small range so that equal
// deadlines (decided by the order) are common.
TEST(DeadlineHeapTest, MinimumMatchesAnOrderedSetUnderRandomChanges) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    DeadlineHeap heap;
    std::set<Key> ref;
    std::vector<int64_t> at_of(300, -1);  // by slot; -1: absent
    std::vector<uint64_t> order_of(300);
    for (uint32_t s = 0; s < order_of.size(); ++s) order_of[s] = (s * 7919) % 1000;  // unique
    for (int step = 0; step < 5000; ++step) {
      const uint32_t slot = static_cast<uint32_t>(rng() % at_of.size());
      const int op = static_cast<int>(rng() % 3);
      if (op == 0 && at_of[slot] < 0) {
        const int64_t at = static_cast<int64_t>(rng() % 50);
        heap.Insert({at, order_of[slot], slot});
        ref.insert({at, order_of[slot], slot});
        at_of[slot] = at;
      } else if (op == 1 && at_of[slot] >= 0) {
        heap.Erase(slot);
        ref.erase({at_of[slot], order_of[slot], slot});
        at_of[slot] = -1;
      } else if (op == 2 && !ref.empty()) {
        const uint32_t top = heap.top().slot;
        heap.Pop();
        ref.erase(ref.begin());
        at_of[top] = -1;
      }
      ASSERT_EQ(heap.size(), ref.size()) << "seed " << seed << " step " << step;
      ASSERT_EQ(heap.contains(slot), at_of[slot] >= 0);
      if (ref.empty()) continue;
      const auto& [at, order, s] = *ref.begin();
      ASSERT_EQ(heap.top().at, at) << "seed " << seed << " step " << step;
      ASSERT_EQ(heap.top().order, order) << "seed " << seed << " step " << step;
      ASSERT_EQ(heap.top().slot, s) << "seed " << seed << " step " << step;
    }
  }
}

TEST(DeadlineHeapTest, EqualDeadlinesComeOutInRegistrationOrder) {
  DeadlineHeap heap;
  heap.Insert({5, 3, 0});
  heap.Insert({5, 1, 1});
  heap.Insert({4, 9, 2});
  heap.Insert({5, 2, 3});
  std::vector<uint32_t> slots;
  while (!heap.empty()) {
    slots.push_back(heap.top().slot);
    heap.Pop();
  }
  EXPECT_EQ(slots, (std::vector<uint32_t>{2, 1, 3, 0}));
}

}  // namespace
}  // namespace uscm::sim
