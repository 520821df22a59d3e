#include "mad/queue_storage.h"

#include <deque>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace uscm::mad {
namespace {

// A type of its own so that other tests' queues do not share the stash.
struct Item {
  int value = 0;
  std::string text;  // a member that owns memory: moved, not copied
};

TEST(RecycledFifoTest, SameOrderAsADequeThroughGrowthAndCompaction) {
  RecycledFifo<Item> fifo;
  std::deque<int> reference;
  int next = 0;
  // Pushes run ahead of pops so the head passes 64 with items left (the
  // compaction), then both drain to empty (the buffer goes to the stash).
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 7; ++i) {
      fifo.push_back(Item{next, std::to_string(next)});
      reference.push_back(next++);
    }
    for (int i = 0; i < (round % 10 == 9 ? 1000 : 5) && !reference.empty(); ++i) {
      ASSERT_FALSE(fifo.empty());
      ASSERT_EQ(fifo.size(), reference.size());
      EXPECT_EQ(fifo.front().value, reference.front());
      EXPECT_EQ(fifo.front().text, std::to_string(reference.front()));
      fifo.pop_front();
      reference.pop_front();
    }
    ASSERT_EQ(fifo.empty(), reference.empty());
  }
}

TEST(RecycledFifoTest, BackIsTheLastPushed) {
  RecycledFifo<Item> fifo;
  fifo.push_back(Item{1, "a"});
  fifo.emplace_back().value = 2;
  EXPECT_EQ(fifo.back().value, 2);
  EXPECT_EQ(fifo.front().value, 1);
}

struct Shared {
  int value = 0;
};

// What the stash is for: a queue that drained hands its (warm) buffer to the
// next queue of the thread that needs one.
TEST(RecycledFifoTest, ADrainedQueuesBufferServesTheNextQueue) {
  RecycledFifo<Shared> a, b;
  a.push_back(Shared{1});
  const Shared* buffer = &a.front();
  a.pop_front();
  b.push_back(Shared{2});
  EXPECT_EQ(&b.front(), buffer);
  EXPECT_EQ(b.front().value, 2);
  b.pop_front();
  a.push_back(Shared{3});
  EXPECT_EQ(&a.front(), buffer);
}

struct Many {
  int value = 0;
};

TEST(QueueStorageTest, KeepsAtMostMaxSpareBuffersAndLeavesTheRestToTheirQueues) {
  std::vector<std::vector<Many>> queues(QueueStorage<Many>::kMaxSpare + 2);
  for (auto& q : queues) {
    QueueStorage<Many>::Lend(q);  // the stash is empty: nothing lent
    EXPECT_EQ(q.capacity(), 0u);
    q.push_back(Many{1});
  }
  for (auto& q : queues) QueueStorage<Many>::Return(q);
  size_t kept = 0;
  for (auto& q : queues) {
    EXPECT_TRUE(q.empty());
    if (q.capacity() != 0) ++kept;
  }
  EXPECT_EQ(kept, 2u);  // the stash was full for the last two
  for (size_t i = 0; i < QueueStorage<Many>::kMaxSpare; ++i) {
    std::vector<Many> fresh;
    QueueStorage<Many>::Lend(fresh);
    EXPECT_NE(fresh.capacity(), 0u) << i;
  }
  std::vector<Many> none;
  QueueStorage<Many>::Lend(none);
  EXPECT_EQ(none.capacity(), 0u);
}

}  // namespace
}  // namespace uscm::mad
