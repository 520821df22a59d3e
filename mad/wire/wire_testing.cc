#include "mad/wire/wire_testing.h"

#include <cctype>

#include "absl/strings/str_format.h"

namespace uscm::mad::wire::testing {

std::vector<uint8_t> Hex(absl::string_view text, size_t pad_to) {
  std::vector<uint8_t> out;
  int nibble = -1;
  bool comment = false;
  for (char c : text) {
    if (c == '|') comment = true;
    if (c == '\n') comment = false;
    if (comment || !std::isxdigit(static_cast<unsigned char>(c))) continue;
    const int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                              : std::tolower(c) - 'a' + 10;
    if (nibble < 0) {
      nibble = v;
    } else {
      out.push_back(static_cast<uint8_t>(nibble << 4 | v));
      nibble = -1;
    }
  }
  if (out.size() < pad_to) out.resize(pad_to, 0);
  return out;
}

std::string DiffBytes(std::span<const uint8_t> got, std::span<const uint8_t> want) {
  std::string out;
  const size_t n = std::max(got.size(), want.size());
  int shown = 0;
  for (size_t i = 0; i < n && shown < 24; ++i) {
    const int g = i < got.size() ? got[i] : -1;
    const int w = i < want.size() ? want[i] : -1;
    if (g != w) {
      out += absl::StrFormat("  byte %3d (MAD+%d): got %02x want %02x\n", i, i, g, w);
      ++shown;
    }
  }
  if (got.size() != want.size()) {
    out += absl::StrFormat("  sizes: got %d want %d\n", got.size(), want.size());
  }
  return out;
}

std::array<uint8_t, 256> Poisoned() {
  std::array<uint8_t, 256> b;
  b.fill(kPoison);
  return b;
}

uint64_t RandomFor(std::mt19937_64& rng, const Field& f) { return rng() & f.max_value(); }

void RandomBytes(std::mt19937_64& rng, std::span<uint8_t> out) {
  for (auto& b : out) b = static_cast<uint8_t>(rng());
}

}  // namespace uscm::mad::wire::testing
