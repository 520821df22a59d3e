#include "cm/router/frame_batch.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "cm/router/frame.h"

namespace uscm::router {

int FrameBatch::Receive(int fd, size_t n) {
  n = std::min(n, kSlots);
  if (slots_ == nullptr) slots_.reset(new uint8_t[kSlots * kMaxFrameBytes]);
  iovec iov[kSlots];
  mmsghdr msgs[kSlots] = {};
  for (size_t i = 0; i < n; ++i) {
    iov[i] = {slots_.get() + i * kMaxFrameBytes, kMaxFrameBytes};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int got = recvmmsg(fd, msgs, static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
  for (int i = 0; i < got; ++i) lengths_[i] = msgs[i].msg_len;
  return got;
}

std::span<const uint8_t> FrameBatch::frame(size_t i) const {
  return {slots_.get() + i * kMaxFrameBytes, lengths_[i]};
}

}  // namespace uscm::router
