// A generation-checked slot map: values live in a vector of slots; a key is
// (index, generation) and stops matching once its value is removed, even after
// the slot is reused. Insert allocates only when no free slot exists.
#ifndef USCM_CM_SLOT_MAP_H_
#define USCM_CM_SLOT_MAP_H_

#include <cassert>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/optional.h"

namespace uscm::cm {

template <typename T>
class SlotMap {
 public:
  struct Key {
    uint32_t index;
    uint32_t generation;
  };

  Key Insert(T value) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    }
    Slot& s = slots_[index];
    assert(!s.value.has_value());
    s.value.emplace(std::move(value));
    ++size_;
    return Key{index, s.generation};
  }

  T* Get(uint32_t index, uint32_t generation) {
    if (index >= slots_.size()) return nullptr;
    Slot& s = slots_[index];
    if (s.generation != generation || !s.value.has_value()) return nullptr;
    return &*s.value;
  }
  const T* Get(uint32_t index, uint32_t generation) const {
    return const_cast<SlotMap*>(this)->Get(index, generation);
  }
  // By index only, for internal tables that store indices of live values.
  T* AtIndex(uint32_t index) {
    if (index >= slots_.size() || !slots_[index].value.has_value()) return nullptr;
    return &*slots_[index].value;
  }
  uint32_t GenerationAt(uint32_t index) const { return slots_[index].generation; }

  bool Remove(uint32_t index, uint32_t generation) {
    if (Get(index, generation) == nullptr) return false;
    Slot& s = slots_[index];
    s.value.reset();
    if (++s.generation == 0) s.generation = 1;  // 0 is the invalid generation
    free_.push_back(index);
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  template <typename F>
  void ForEach(F&& f) {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].value.has_value()) f(Key{i, slots_[i].generation}, *slots_[i].value);
    }
  }

 private:
  struct Slot {
    uint32_t generation = 1;
    absl::optional<T> value;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t size_ = 0;
};

}  // namespace uscm::cm

#endif  // USCM_CM_SLOT_MAP_H_
