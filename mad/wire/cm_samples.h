// One plausible message of every CM type, for dispatcher tests and as seed
// inputs for the fuzz targets.
#ifndef USCM_MAD_WIRE_CM_SAMPLES_H_
#define USCM_MAD_WIRE_CM_SAMPLES_H_

#include <array>
#include <cstdint>
#include <vector>

#include "mad/wire/cm_message.h"

namespace uscm::mad::wire {

std::vector<CmMessage> SampleCmMessages();  // REQ, MRA, REJ, REP, RTU, ... APR
// The samples emitted into 256-byte MADs (same order).
std::vector<std::array<uint8_t, 256>> SampleCmMads();

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_SAMPLES_H_
