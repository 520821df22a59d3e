// Helpers shared by the wire tests: hex fixtures, poisoned buffers, the
// truncation sweep, and a seeded source of random field values.
#ifndef USCM_MAD_WIRE_WIRE_TESTING_H_
#define USCM_MAD_WIRE_WIRE_TESTING_H_

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "mad/wire/field.h"

namespace uscm::mad::wire::testing {

inline constexpr uint8_t kPoison = 0xA5;

// "01 07 02 03  | comment" -> bytes. Whitespace is ignored and '|' starts a
// comment that runs to the end of the line; the result is zero-padded to `pad_to`.
std::vector<uint8_t> Hex(absl::string_view text, size_t pad_to = 256);

// Hex dump of the bytes that differ, for readable golden-test failures.
std::string DiffBytes(std::span<const uint8_t> got, std::span<const uint8_t> want);

// A 256-byte buffer full of kPoison: a field the emitter forgets shows up in
// the golden comparison.
std::array<uint8_t, 256> Poisoned();

// A random value that fits `f` (for fields of at most 64 bits).
uint64_t RandomFor(std::mt19937_64& rng, const Field& f);
void RandomBytes(std::mt19937_64& rng, std::span<uint8_t> out);

}  // namespace uscm::mad::wire::testing

#endif  // USCM_MAD_WIRE_WIRE_TESTING_H_
