// Private data carried by CM messages. The wire has no length: a receiver always
// gets the message's whole field (zero-filled by the sender), so a parsed
// PrivateData has the message's full capacity (REQ 92, REP 196, REJ 148, ...).
#ifndef USCM_MAD_WIRE_PRIVATE_DATA_H_
#define USCM_MAD_WIRE_PRIVATE_DATA_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

namespace uscm::mad::wire {

// The bytes past size() are always zero, so a copy is one fixed-size move and
// an emitter fills a whole field (data plus zero padding) with one fixed-size
// copy from padded().
class PrivateData {
 public:
  static constexpr size_t kMaxBytes = 224;  // RTU / DREP: the largest field

  PrivateData() = default;
  // Keeps at most kMaxBytes; message emitters reject more than their capacity.
  explicit PrivateData(std::span<const uint8_t> bytes) { Assign(bytes); }

  // Replaces the contents with (at most kMaxBytes of) `bytes`. Only the old
  // bytes past the new size need clearing: beyond the old size all are zero
  // already (so filling a fresh PrivateData clears nothing).
  [[gnu::always_inline]] void Assign(std::span<const uint8_t> bytes) {
    const uint8_t old_size = size_;
    size_ = static_cast<uint8_t>(std::min(bytes.size(), kMaxBytes));
    if (size_ != 0) std::memcpy(bytes_.data(), bytes.data(), size_);
    if (old_size > size_) std::memset(bytes_.data() + size_, 0, old_size - size_);
  }

  std::span<const uint8_t> bytes() const { return {bytes_.data(), size_}; }
  // All kMaxBytes: bytes() followed by zeros.
  std::span<const uint8_t, kMaxBytes> padded() const { return bytes_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  friend bool operator==(const PrivateData&, const PrivateData&) = default;

 private:
  uint8_t size_ = 0;
  std::array<uint8_t, kMaxBytes> bytes_{};  // zero past size_
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_PRIVATE_DATA_H_
