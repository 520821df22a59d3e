// Storage for protocol objects' FIFO queues (the CM endpoint's transmit and
// event queues, the MAD agent's transmit queue) shared by every object of a
// thread. A queue that drains empty hands its buffer to a small per-thread
// stash; the next object that queues something takes it from there. A caller
// that drains after every call (the simulator, the runtime) keeps one buffer
// going round, always in cache, instead of one buffer per object that is cold
// again at each use when a process drives thousands of them
// (docs/SIMULATOR.md "Scaling"). Only capacity moves: what a queue
// holds, and in which order, is exactly as with its own vector. Nothing is
// allocated per MAD or event once the stash is warm.
#ifndef USCM_MAD_QUEUE_STORAGE_H_
#define USCM_MAD_QUEUE_STORAGE_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace uscm::mad {

template <typename T>
class QueueStorage {
 public:
  // Spare buffers kept per thread (and per T); more are freed.
  static constexpr size_t kMaxSpare = 4;

  // Before pushing onto `q`: if it has no buffer, gives it a spare one.
  static void Lend(std::vector<T>& q) {
    if (q.capacity() != 0) return;
    std::vector<std::vector<T>>& spare = Spare();
    if (spare.empty()) return;
    q.swap(spare.back());
    spare.pop_back();
  }

  // After `q` drained (everything in it was handed out): keeps its buffer
  // for the next object. `q` is left empty, without a buffer unless the stash is full.
  static void Return(std::vector<T>& q) {
    q.clear();
    if (q.capacity() == 0) return;
    std::vector<std::vector<T>>& spare = Spare();
    if (spare.size() >= kMaxSpare) return;  // q keeps its own
    spare.emplace_back().swap(q);
  }

 private:
  // Freed when the thread exits: an endpoint must not be drained after
  // that on the same thread (by a thread_local or static destructor).
  static std::vector<std::vector<T>>& Spare() {
    thread_local std::vector<std::vector<T>> spare = [] {
      std::vector<std::vector<T>> v;
      v.reserve(kMaxSpare);
      return v;
    }();
    return spare;
  }
};

// A FIFO queue over a vector read from a head index, its buffer lent by
// QueueStorage while it holds anything (the deque it replaces kept a node
// of its own per object, cold at every use with thousands of objects).
template <typename T>
class RecycledFifo {
 public:
  bool empty() const { return head_ == q_.size(); }
  size_t size() const { return q_.size() - head_; }
  T& front() { return q_[head_]; }
  T& back() { return q_.back(); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    QueueStorage<T>::Lend(q_);
    return q_.emplace_back(std::forward<Args>(args)...);
  }
  void push_back(T v) { emplace_back(std::move(v)); }
  // Drops the front; a long-lived backlog is compacted now and then so the
  // vector does not grow without bound.
  void pop_front() {
    if (++head_ == q_.size()) {
      QueueStorage<T>::Return(q_);
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= q_.size()) {
      q_.erase(q_.begin(), q_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  std::vector<T> q_;
  size_t head_ = 0;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_QUEUE_STORAGE_H_
