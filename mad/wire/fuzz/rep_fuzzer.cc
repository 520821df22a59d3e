// libFuzzer target: REP Parse -> Emit -> Parse must be the identity.
#include <cstddef>
#include <cstdint>

#include "mad/wire/fuzz/round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uscm::mad::wire::fuzz::RoundTrip<uscm::mad::wire::RepRepr>("REP", data, size);
}
