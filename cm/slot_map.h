// A generation-checked slot map: values live in a vector of slots; a key is
// (index, generation) and stops matching once its value is removed, even after
// the slot is reused. Insert allocates only when no free slot exists, and
// then one chunk of kChunk slots: values never move and growing never
// copies (a doubling vector would leave up to half its capacity unused).
#ifndef USCM_CM_SLOT_MAP_H_
#define USCM_CM_SLOT_MAP_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

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
      index = static_cast<uint32_t>(capacity_);
      if (capacity_ % kChunk == 0) {
        chunks_.push_back(std::make_unique<Slot[]>(kChunk));
        first_chunk_ = chunks_.front().get();
      }
      ++capacity_;
    }
    Slot& s = slot(index);
    assert(!s.live);
    s.Emplace(std::move(value));
    ++size_;
    return Key{index, s.generation};
  }

  T* Get(uint32_t index, uint32_t generation) {
    if (index >= capacity_) return nullptr;
    Slot& s = slot(index);
    if (s.generation != generation || !s.live) return nullptr;
    return &s.value();
  }
  const T* Get(uint32_t index, uint32_t generation) const {
    return const_cast<SlotMap*>(this)->Get(index, generation);
  }
  // By index only, for internal tables that store indices of live values.
  T* AtIndex(uint32_t index) {
    if (index >= capacity_ || !slot(index).live) return nullptr;
    return &slot(index).value();
  }
  uint32_t GenerationAt(uint32_t index) const {
    return const_cast<SlotMap*>(this)->slot(index).generation;
  }

  bool Remove(uint32_t index, uint32_t generation) {
    if (Get(index, generation) == nullptr) return false;
    Slot& s = slot(index);
    s.Reset();
    if (++s.generation == 0) s.generation = 1;  // 0 is the invalid generation
    free_.push_back(index);
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  template <typename F>
  void ForEach(F&& f) {
    for (uint32_t i = 0; i < capacity_; ++i) {
      Slot& s = slot(i);
      if (s.live) f(Key{i, s.generation}, s.value());
    }
  }

 private:
  // The generation and whether the slot holds a value side by side, before
  // the value: a lookup reads the slot's first line only (an optional<T>
  // keeps its flag after T, a line further on for a connection record, one
  // more cold line per lookup on a host not touched for a while).
  // A slot of a large value starts a cache line (a connection record's
  // slot is six lines: its first three hold what a lookup and freeing read).
  static constexpr size_t kSlotAlign = sizeof(T) >= 64 ? 64 : alignof(uint64_t);
  struct alignas(T) alignas(kSlotAlign) Slot {
    uint32_t generation = 1;
    bool live = false;
    alignas(T) unsigned char storage[sizeof(T)];

    Slot() {}  // the storage is left alone until a value is placed in it
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Reset(); }
    T& value() { return *std::launder(reinterpret_cast<T*>(storage)); }
    void Emplace(T&& v) {
      ::new (static_cast<void*>(storage)) T(std::move(v));
      live = true;
    }
    void Reset() {
      if (!live) return;
      value().~T();
      live = false;
    }
  };
  static constexpr uint32_t kChunk = 256;
  // The first chunk without going through chunks_: a host with few
  // connections never leaves it, and in a simulation of thousands of hosts
  // chunks_'s own storage is one more cold line per lookup.
  Slot& slot(uint32_t index) {
    if (index < kChunk) return first_chunk_[index];
    return chunks_[index / kChunk][index % kChunk];
  }

  Slot* first_chunk_ = nullptr;  // chunks_[0], once allocated
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  size_t capacity_ = 0;  // slots handed out so far (all chunks but the last are full)
  std::vector<uint32_t> free_;
  size_t size_ = 0;
};

}  // namespace uscm::cm

#endif  // USCM_CM_SLOT_MAP_H_
