// Fuzz target: PathRecord as a whole SA MAD and as a bare record (the bytes of one
// AttributeOffset stride). Whatever Parse accepts must round-trip.
#include "mad/wire/fuzz/round_trip.h"
#include "mad/wire/path_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uscm::mad::wire;  // NOLINT
  fuzz::RoundTrip<SaRecordMad<PathRecord>>("PathRecord MAD", data, size);
  fuzz::RoundTrip<PathRecord>("PathRecord", data, size);
  return 0;
}
