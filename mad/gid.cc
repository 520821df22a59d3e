#include "mad/gid.h"

#include <arpa/inet.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace uscm::mad {

Gid Gid::FromParts(uint64_t subnet_prefix, uint64_t interface_id) {
  Gid g;
  for (int i = 0; i < 8; ++i) {
    g.raw[i] = static_cast<uint8_t>(subnet_prefix >> (56 - 8 * i));
    g.raw[8 + i] = static_cast<uint8_t>(interface_id >> (56 - 8 * i));
  }
  return g;
}

absl::StatusOr<Gid> Gid::Parse(absl::string_view text) {
  Gid g;
  const std::string s(text);
  if (inet_pton(AF_INET6, s.c_str(), g.raw.data()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", s, "' is not a GID (expected IPv6 notation, e.g. fe80::2:c903:a1:b2c3)"));
  }
  return g;
}

uint64_t Gid::subnet_prefix() const {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | raw[i];
  return v;
}

uint64_t Gid::interface_id() const {
  uint64_t v = 0;
  for (int i = 8; i < 16; ++i) v = (v << 8) | raw[i];
  return v;
}

bool Gid::is_zero() const {
  for (uint8_t b : raw) {
    if (b != 0) return false;
  }
  return true;
}

std::string Gid::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, raw.data(), buf, sizeof(buf));
  return buf;
}

}  // namespace uscm::mad
