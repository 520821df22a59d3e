// Frames taken from a SOCK_SEQPACKET socket in batches: one recvmmsg(2) fills
// up to kSlots slots of kMaxFrameBytes, so a wake with k frames queued costs
// one syscall instead of k reads and one more that says EAGAIN. Both ends of
// the router's socket use it (uscmd's Server, the library's RouterTransport).
#ifndef USCM_CM_ROUTER_FRAME_BATCH_H_
#define USCM_CM_ROUTER_FRAME_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace uscm::router {

class FrameBatch {
 public:
  static constexpr size_t kSlots = 8;

  // Receives up to `n` (at most kSlots) frames without blocking: recvmmsg's
  // result, -1 with errno set (EAGAIN: nothing queued). Fewer than `n` means
  // the socket is now empty. The slots are allocated at the first call and
  // left uninitialised: only the pages a frame lands in are touched.
  int Receive(int fd, size_t n);
  // Frame i of the last Receive. Empty: the peer closed its end (a frame has
  // at least its header).
  std::span<const uint8_t> frame(size_t i) const;

 private:
  std::unique_ptr<uint8_t[]> slots_;
  unsigned lengths_[kSlots] = {};
};

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_FRAME_BATCH_H_
