// A block of ephemeral ports that uscmd (cm/router) leases to one client,
// shared between the two: one atomic state byte per port. The lessee takes a
// port for a bind with Claim (free -> claimed) and gives it back with Free
// (claimed -> free), with no frame to uscmd; uscmd, for another client's
// claim of a port in the block, Takes it (free -> taken: the port is no
// longer the lessee's) or finds it claimed (a conflict). Any other value is
// the lessee's doing (the page is writable by it): uscmd reads it as claimed,
// so a hostile lessee only keeps its own ports from others.
//
// Across processes the bytes live in a memfd (CreateShared / Map; uscmd sends
// the fd with SCM_RIGHTS); in one process (tests, the simulator's routers)
// on the heap (CreateLocal), with the same atomics.
#ifndef USCM_MAD_PORT_PAGE_H_
#define USCM_MAD_PORT_PAGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace uscm::mad {

class PortPage {
 public:
  enum class State : uint8_t { kFree = 0, kClaimed = 1, kTaken = 2 };

  // `ports` state bytes, all free, in a memfd of their own (fd() >= 0).
  static absl::StatusOr<std::shared_ptr<PortPage>> CreateShared(size_t ports);
  // The lessee's mapping of a page made by CreateShared (`fd` is dup'ed; the
  // caller keeps its own). InvalidArgument when the file is shorter.
  static absl::StatusOr<std::shared_ptr<PortPage>> Map(int fd, size_t ports);
  // On the heap (fd() is -1), for a lessee in the same process.
  static std::shared_ptr<PortPage> CreateLocal(size_t ports);

  PortPage(const PortPage&) = delete;
  PortPage& operator=(const PortPage&) = delete;
  ~PortPage();

  size_t size() const { return size_; }
  int fd() const { return fd_; }

  // The lessee's side.
  bool Claim(size_t i) { return Cas(i, State::kFree, State::kClaimed); }
  // Only a port it claimed; false (and nothing changes) otherwise.
  bool Free(size_t i) { return Cas(i, State::kClaimed, State::kFree); }
  // uscmd's side: free -> taken.
  bool Take(size_t i) { return Cas(i, State::kFree, State::kTaken); }
  // taken -> free (the other client's claim is gone); false otherwise.
  bool GiveBack(size_t i) { return Cas(i, State::kTaken, State::kFree); }
  // The raw byte (may be any value: the lessee writes the page).
  uint8_t Load(size_t i) const { return At(i).load(std::memory_order_acquire); }
  // Tests only: what a hostile lessee could write.
  void StoreRawForTesting(size_t i, uint8_t v) { At(i).store(v, std::memory_order_release); }

 private:
  PortPage(uint8_t* bytes, size_t size, int fd, size_t map_bytes);
  std::atomic<uint8_t>& At(size_t i) const;
  bool Cas(size_t i, State from, State to) {
    uint8_t expected = static_cast<uint8_t>(from);
    return At(i).compare_exchange_strong(expected, static_cast<uint8_t>(to),
                                         std::memory_order_acq_rel);
  }

  uint8_t* bytes_;
  size_t size_;
  int fd_;            // -1: heap
  size_t map_bytes_;  // 0: heap
};

// net.ipv4.ip_local_port_range into *low / *high (left as they are when it
// cannot be read): the kernel's range for cma_alloc_any_port, the library's
// ephemeral ports and the blocks uscmd leases.
void ReadLocalPortRange(uint16_t* low, uint16_t* high);

}  // namespace uscm::mad

#endif  // USCM_MAD_PORT_PAGE_H_
