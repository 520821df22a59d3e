// Fuzz target: ClassPortInfo as a whole SA MAD and as a bare record (the bytes of one
// AttributeOffset stride). Whatever Parse accepts must round-trip.
#include "mad/wire/fuzz/round_trip.h"
#include "mad/wire/sa_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uscm::mad::wire;  // NOLINT
  fuzz::RoundTrip<SaRecordMad<ClassPortInfo>>("ClassPortInfo MAD", data, size);
  fuzz::RoundTrip<ClassPortInfo>("ClassPortInfo", data, size);
  return 0;
}
