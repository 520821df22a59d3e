// Test helpers shared by the CM message tests: the exact-error truncation
// sweep and seeded random values for paths, GIDs and private data.
#ifndef USCM_MAD_WIRE_CM_TESTING_H_
#define USCM_MAD_WIRE_CM_TESTING_H_

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "mad/gid.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_path.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire::testing {

// A field as the test states it, independently of the implementation's
// table: its name and first / last MAD byte.
struct FieldSpan {
  const char* name;
  int first;
  int last;
};

// Parses every prefix of `golden` (0 .. 255 bytes) and expects exactly
//   "<what>: MAD header truncated: <n> of 256 bytes; <F> (MAD bytes a..b) is incomplete"
// inside the header, and
//   "<what> truncated: <n> of 256 bytes; <F> (MAD bytes a..b) is incomplete"
// in the body, where F is the first span of `body` (in wire order) that the
// prefix does not hold completely. `body` must tile MAD bytes 24..255.
void ExpectExactTruncationErrors(
    const std::function<absl::Status(std::span<const uint8_t>)>& parse, const char* what,
    std::span<const uint8_t> golden, const std::vector<FieldSpan>& body);

Gid RandomGid(std::mt19937_64& rng);
CmPath RandomPath(std::mt19937_64& rng);
CmEnvelope RandomEnvelope(std::mt19937_64& rng, bool with_attribute_modifier);
// `capacity` random bytes: a parsed PrivateData always has the full capacity.
PrivateData RandomPrivateData(std::mt19937_64& rng, size_t capacity);
// Random length 0..72 and random bytes in all 72.
InfoBlock RandomInfoBlock(std::mt19937_64& rng);

}  // namespace uscm::mad::wire::testing

#endif  // USCM_MAD_WIRE_CM_TESTING_H_
