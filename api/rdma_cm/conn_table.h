// The rdma_cm id of each CM connection, by its cm::ConnId. The CM's slot map
// numbers its connections densely from 0 (cm/slot_map.h), so an id is found
// by indexing and comparing the generation: no hash per CM event, per
// connect or per destroy. Entries live in chunks of kChunk, allocated as the
// indices grow and kept (as the slot map's own): 16 bytes per connection.
#ifndef USCM_API_RDMA_CM_CONN_TABLE_H_
#define USCM_API_RDMA_CM_CONN_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "cm/types.h"

namespace uscm {

template <typename T>
class ConnTable {
 public:
  // The value set for `c`, or null (never set, erased, or set for another
  // generation of the same index).
  T* Find(cm::ConnId c) const {
    const Entry* e = At(c.index);
    return e != nullptr && e->generation == c.generation && c.valid() ? e->value : nullptr;
  }
  bool contains(cm::ConnId c) const { return Find(c) != nullptr; }
  // `c` -> `value` (c.valid()); replaces what its index held.
  void Set(cm::ConnId c, T* value) {
    while (c.index / kChunk >= chunks_.size()) chunks_.push_back(std::make_unique<Entry[]>(kChunk));
    Entry& e = chunks_[c.index / kChunk][c.index % kChunk];
    size_ += e.value == nullptr;
    e.generation = c.generation;
    e.value = value;
  }
  // Forgets `c`; nothing when its index holds another generation.
  void Erase(cm::ConnId c) {
    Entry* e = At(c.index);
    if (e == nullptr || e->generation != c.generation || e->value == nullptr) return;
    e->value = nullptr;
    e->generation = 0;
    --size_;
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kChunk = 256;
  struct Entry {
    uint32_t generation = 0;
    T* value = nullptr;
  };
  Entry* At(uint32_t index) const {
    const size_t chunk = index / kChunk;
    return chunk < chunks_.size() ? &chunks_[chunk][index % kChunk] : nullptr;
  }

  std::vector<std::unique_ptr<Entry[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace uscm

#endif  // USCM_API_RDMA_CM_CONN_TABLE_H_
