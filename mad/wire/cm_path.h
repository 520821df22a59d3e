// The path a CM message describes: REQ carries a primary and an optional
// alternate path, LAP a new alternate path. The rows live in each message's
// table (the packing differs: LAP puts the traffic class before the rate);
// PathFields names which rows hold which part.
#ifndef USCM_MAD_WIRE_CM_PATH_H_
#define USCM_MAD_WIRE_CM_PATH_H_

#include <cstdint>

#include "mad/gid.h"
#include "mad/wire/field.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

struct CmPath {
  uint16_t local_lid = 0;   // "local" = the sender of the message
  uint16_t remote_lid = 0;
  Gid local_gid;
  Gid remote_gid;
  uint32_t flow_label = 0;        // 20 bits
  uint8_t packet_rate = 0;        // 6 bits, IBA static rate enum (e.g. 3 = 10 Gb/s)
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;                 // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us * 2^t

  // Every field zero: how REQ encodes "no alternate path" (see ReqRepr).
  bool is_zero() const { return *this == CmPath{}; }
  friend bool operator==(const CmPath&, const CmPath&) = default;
};

struct PathFields {
  Field local_lid, remote_lid, local_gid, remote_gid, flow_label, packet_rate,
      traffic_class, hop_limit, sl, subnet_local, local_ack_timeout;
};

CmPath ReadPath(const FieldView& v, const PathFields& f);
void WritePath(FieldWriter& w, const PathFields& f, const CmPath& p);

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_PATH_H_
