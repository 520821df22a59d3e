// The path a CM message describes: REQ carries a primary and an optional
// alternate path, LAP a new alternate path. The rows live in each message's
// table (the packing differs: LAP puts the traffic class before the rate);
// PathFields names which rows hold which part.
#ifndef USCM_MAD_WIRE_CM_PATH_H_
#define USCM_MAD_WIRE_CM_PATH_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

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
  // (Field by field, without the memcmp calls of operator==.)
  bool is_zero() const {
    uint64_t g[4];
    std::memcpy(&g[0], local_gid.raw.data(), 16);
    std::memcpy(&g[2], remote_gid.raw.data(), 16);
    return ((g[0] | g[1] | g[2] | g[3]) |
            (local_lid | remote_lid | flow_label | packet_rate | traffic_class | hop_limit |
             sl | static_cast<uint32_t>(subnet_local) | local_ack_timeout)) == 0;
  }
  friend bool operator==(const CmPath&, const CmPath&) = default;
};

struct PathFields {
  Field local_lid, remote_lid, local_gid, remote_gid, flow_label, packet_rate,
      traffic_class, hop_limit, sl, subnet_local, local_ack_timeout;
};

namespace path_internal {

[[gnu::always_inline]] inline Gid ReadGid(const FieldView& v, const Field& f) {
  Gid g;
  const auto b = v.Bytes(f);
  std::copy(b.begin(), b.end(), g.raw.begin());
  return g;
}

}  // namespace path_internal

// Inline so that with a constexpr PathFields every row access folds to
// constant shifts (the REQ emit/parse hot path).
[[gnu::always_inline]] inline CmPath ReadPath(const FieldView& v, const PathFields& f) {
  CmPath p;
  p.local_lid = v.Get(f.local_lid);
  p.remote_lid = v.Get(f.remote_lid);
  p.local_gid = path_internal::ReadGid(v, f.local_gid);
  p.remote_gid = path_internal::ReadGid(v, f.remote_gid);
  p.flow_label = v.Get(f.flow_label);
  p.packet_rate = v.Get(f.packet_rate);
  p.traffic_class = v.Get(f.traffic_class);
  p.hop_limit = v.Get(f.hop_limit);
  p.sl = v.Get(f.sl);
  p.subnet_local = v.Get(f.subnet_local) != 0;
  p.local_ack_timeout = v.Get(f.local_ack_timeout);
  return p;
}

[[gnu::always_inline]] inline void WritePath(FieldWriter& w, const PathFields& f,
                                             const CmPath& p) {
  w.Set(f.local_lid, p.local_lid);
  w.Set(f.remote_lid, p.remote_lid);
  w.SetBytes(f.local_gid, p.local_gid.raw);
  w.SetBytes(f.remote_gid, p.remote_gid.raw);
  w.Set(f.flow_label, p.flow_label);
  w.Set(f.packet_rate, p.packet_rate);
  w.Set(f.traffic_class, p.traffic_class);
  w.Set(f.hop_limit, p.hop_limit);
  w.Set(f.sl, p.sl);
  w.Set(f.subnet_local, p.subnet_local ? 1 : 0);
  w.Set(f.local_ack_timeout, p.local_ack_timeout);
}


}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_PATH_H_
