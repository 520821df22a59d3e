// Any CM message: a variant of every repr, with a dispatcher that parses by
// AttributeID (used by the CM core and the printer) and the matching emitter.
#ifndef USCM_MAD_WIRE_CM_MESSAGE_H_
#define USCM_MAD_WIRE_CM_MESSAGE_H_

#include <cstdint>
#include <span>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_drep.h"
#include "mad/wire/cm_dreq.h"
#include "mad/wire/cm_lap_apr.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"
#include "mad/wire/cm_req.h"
#include "mad/wire/cm_rtu.h"
#include "mad/wire/cm_sidr.h"

namespace uscm::mad::wire {

using CmMessage = std::variant<ReqRepr, MraRepr, RejRepr, RepRepr, RtuRepr, DreqRepr, DrepRepr,
                               SidrReqRepr, SidrRepRepr, LapRepr, AprRepr>;

// Checks the MAD header (class 0x07 version 2, method Send) and dispatches on
// AttributeID. ClassPortInfo (0x0001, Get/GetResp) and unknown attributes are
// errors: "CM: AttributeID 0x0042 is not a CM message".
absl::StatusOr<CmMessage> ParseAnyCm(std::span<const uint8_t> mad);
absl::Status EmitCm(const CmMessage& message, std::span<uint8_t> mad);

CmAttr AttrOf(const CmMessage& message);
const CmEnvelope& EnvelopeOf(const CmMessage& message);

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_MESSAGE_H_
