// The scheduler's index of notified actors with a future deadline: a 4-ary
// min-heap of (deadline, registration order) with each actor's position kept
// by its slot, so a changed deadline is erased in place. It replaced an
// absl::btree_set: at 10,240 hosts a wake erased and inserted the host in a
// tree of ~10,000 keys (two cold root-to-leaf walks with a binary search per
// node); here a far deadline inserted at the end stops after one comparison,
// and most erased entries sit near the leaves. Keys are unique (the order
// is), so the minimum, and with it the scheduler's choice, is the same as
// the tree's.
#ifndef USCM_MAD_SIM_DEADLINE_HEAP_H_
#define USCM_MAD_SIM_DEADLINE_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uscm::sim {

class DeadlineHeap {
 public:
  struct Item {
    int64_t at;      // deadline, ns
    uint64_t order;  // registration order: the tie-break
    uint32_t slot;   // the actor's slot (at most one item per slot)
  };

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const Item& top() const { return items_.front(); }
  bool contains(uint32_t slot) const { return slot < pos_.size() && pos_[slot] != kAbsent; }

  void Insert(const Item& item) {
    if (item.slot >= pos_.size()) pos_.resize(item.slot + 1, kAbsent);
    items_.push_back(item);
    SiftUp(items_.size() - 1);
  }
  // Removes the slot's item; it must be present.
  void Erase(uint32_t slot) {
    const size_t i = pos_[slot];
    pos_[slot] = kAbsent;
    const Item last = items_.back();
    items_.pop_back();
    if (i == items_.size()) return;
    items_[i] = last;
    pos_[last.slot] = static_cast<uint32_t>(i);
    if (i > 0 && Less(last, items_[(i - 1) / kArity])) {
      SiftUp(i);
    } else {
      SiftDown(i);
    }
  }
  void Pop() { Erase(items_.front().slot); }

 private:
  static constexpr size_t kArity = 4;  // 4 children of 24 B: two cache lines
  static constexpr uint32_t kAbsent = UINT32_MAX;

  static bool Less(const Item& a, const Item& b) {
    return a.at != b.at ? a.at < b.at : a.order < b.order;
  }
  void Place(size_t i, const Item& item) {
    items_[i] = item;
    pos_[item.slot] = static_cast<uint32_t>(i);
  }
  void SiftUp(size_t i) {
    const Item item = items_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!Less(item, items_[parent])) break;
      Place(i, items_[parent]);
      i = parent;
    }
    Place(i, item);
  }
  void SiftDown(size_t i) {
    const Item item = items_[i];
    const size_t n = items_.size();
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c) {
        if (Less(items_[c], items_[best])) best = c;
      }
      if (!Less(items_[best], item)) break;
      Place(i, items_[best]);
      i = best;
    }
    Place(i, item);
  }

  std::vector<Item> items_;
  std::vector<uint32_t> pos_;  // by slot: index in items_, or kAbsent
};

}  // namespace uscm::sim

#endif  // USCM_MAD_SIM_DEADLINE_HEAP_H_
