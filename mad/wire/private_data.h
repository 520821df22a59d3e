// Private data carried by CM messages. The wire has no length: a receiver always
// gets the message's whole field (zero-filled by the sender), so a parsed
// PrivateData has the message's full capacity (REQ 92, REP 196, REJ 148, ...).
#ifndef USCM_MAD_WIRE_PRIVATE_DATA_H_
#define USCM_MAD_WIRE_PRIVATE_DATA_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

namespace uscm::mad::wire {

class PrivateData {
 public:
  static constexpr size_t kMaxBytes = 224;  // RTU / DREP: the largest field

  PrivateData() = default;
  // Keeps at most kMaxBytes; message emitters reject more than their capacity.
  explicit PrivateData(std::span<const uint8_t> bytes)
      : size_(static_cast<uint8_t>(std::min(bytes.size(), kMaxBytes))) {
    std::copy_n(bytes.begin(), size_, bytes_.begin());
  }

  std::span<const uint8_t> bytes() const { return {bytes_.data(), size_}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  friend bool operator==(const PrivateData& a, const PrivateData& b) {
    return a.size_ == b.size_ && std::equal(a.bytes_.begin(), a.bytes_.begin() + a.size_,
                                            b.bytes_.begin());
  }

 private:
  std::array<uint8_t, kMaxBytes> bytes_{};
  uint8_t size_ = 0;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_PRIVATE_DATA_H_
