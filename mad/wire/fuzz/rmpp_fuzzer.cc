// Fuzz target: the RMPP header (MAD bytes 24..35). Whatever Parse accepts must
// round-trip.
#include "mad/wire/fuzz/round_trip.h"
#include "mad/wire/rmpp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uscm::mad::wire::fuzz::RoundTrip<uscm::mad::wire::RmppHeader>("RMPP header", data,
                                                                       size);
}
