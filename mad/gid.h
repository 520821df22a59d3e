// A 128-bit InfiniBand GID (or RoCE GID), stored in wire order.
#ifndef USCM_MAD_GID_H_
#define USCM_MAD_GID_H_

#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace uscm::mad {

struct Gid {
  std::array<uint8_t, 16> raw{};

  static Gid FromParts(uint64_t subnet_prefix, uint64_t interface_id);
  // Accepts IPv6 text ("fe80::2:c903:a1:b2c3").
  static absl::StatusOr<Gid> Parse(absl::string_view text);

  uint64_t subnet_prefix() const;
  uint64_t interface_id() const;
  bool is_zero() const;
  std::string ToString() const;  // compressed IPv6 notation, as tshark prints it

  friend auto operator<=>(const Gid&, const Gid&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Gid& g) {
    return H::combine(std::move(h), g.raw);
  }
};

}  // namespace uscm::mad

#endif  // USCM_MAD_GID_H_
