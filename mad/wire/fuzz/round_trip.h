// The property every CM fuzz target checks: whatever Parse accepts, Emit must
// write, and the bytes Emit wrote must parse back to the same repr. A
// mismatch is our bug, so it aborts (libFuzzer then saves the input).
#ifndef USCM_MAD_WIRE_FUZZ_ROUND_TRIP_H_
#define USCM_MAD_WIRE_FUZZ_ROUND_TRIP_H_

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "mad/wire/cm_message.h"
#include "mad/wire/cma_header.h"

namespace uscm::mad::wire::fuzz {

[[noreturn]] inline void Fail(const char* what, const char* why) {
  std::fprintf(stderr, "round trip failed for %s: %s\n", what, why);
  std::abort();
}

// Repr has static Parse(span) -> StatusOr<Repr> and Emit(span) -> Status.
template <typename Repr>
int RoundTrip(const char* what, const uint8_t* data, size_t size) {
  auto first = Repr::Parse(std::span<const uint8_t>(data, size));
  if (!first.ok()) return 0;  // garbage in: a clean error is the right answer
  std::array<uint8_t, 256> out;
  out.fill(0xA5);
  if (absl::Status s = first->Emit(out); !s.ok()) Fail(what, "Emit rejected a parsed repr");
  auto second = Repr::Parse(out);
  if (!second.ok()) Fail(what, "Parse rejected what Emit wrote");
  if (!(*second == *first)) Fail(what, "Parse(Emit(x)) != x");
  return 0;
}

inline int RoundTripAnyCm(const uint8_t* data, size_t size) {
  auto first = ParseAnyCm(std::span<const uint8_t>(data, size));
  if (!first.ok()) return 0;
  std::array<uint8_t, 256> out;
  out.fill(0xA5);
  if (!EmitCm(*first, out).ok()) Fail("CM", "EmitCm rejected a parsed message");
  auto second = ParseAnyCm(out);
  if (!second.ok()) Fail("CM", "ParseAnyCm rejected what EmitCm wrote");
  if (!(*second == *first)) Fail("CM", "ParseAnyCm(EmitCm(x)) != x");
  if (AttrOf(*second) != AttrOf(*first)) Fail("CM", "attribute changed");
  return 0;
}

inline int RoundTripCmaHeader(const uint8_t* data, size_t size) {
  auto first = CmaHeader::Parse(std::span<const uint8_t>(data, size));
  if (!first.ok()) return 0;
  std::array<uint8_t, cma::kHeaderBytes> out;
  out.fill(0xA5);
  if (!first->Emit(out).ok()) Fail("CMA header", "Emit rejected a parsed header");
  auto second = CmaHeader::Parse(out);
  if (!second.ok()) Fail("CMA header", "Parse rejected what Emit wrote");
  if (!(*second == *first)) Fail("CMA header", "Parse(Emit(x)) != x");
  return 0;
}

}  // namespace uscm::mad::wire::fuzz

#endif  // USCM_MAD_WIRE_FUZZ_ROUND_TRIP_H_
