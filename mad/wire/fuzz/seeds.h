// Seed inputs shared by the fuzz targets, their driver and the seed test.
#ifndef USCM_MAD_WIRE_FUZZ_SEEDS_H_
#define USCM_MAD_WIRE_FUZZ_SEEDS_H_

#include <cstdint>
#include <vector>

namespace uscm::mad::wire::fuzz {

// One sample MAD per CM type (mad/wire/cm_samples.h) and the CMA header of
// the digest's example (10.0.0.1:5000 -> 10.0.0.2:7471).
std::vector<std::vector<uint8_t>> Seeds();

}  // namespace uscm::mad::wire::fuzz

#endif  // USCM_MAD_WIRE_FUZZ_SEEDS_H_
