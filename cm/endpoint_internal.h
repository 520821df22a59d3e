// Internal helpers shared by the endpoint_*.cc files.
#ifndef USCM_CM_ENDPOINT_INTERNAL_H_
#define USCM_CM_ENDPOINT_INTERNAL_H_

#include <array>
#include <cassert>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cm/endpoint.h"
#include "cm/types.h"
#include "mad/queue_storage.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_path.h"

namespace uscm::cm {
namespace internal {

// "private data is 200 bytes; REQ carries at most 92"
absl::Status CheckPrivateData(std::span<const uint8_t> pd, size_t limit,
                              absl::string_view message);
// "Accept is not allowed in state ESTABLISHED"
absl::Status WrongState(absl::string_view call, CmState s);
// AttributeID - 0x10, or -1 when outside REQ..APR.
int AttrIndex(mad::wire::CmAttr a);

inline mad::wire::CmPath ToWire(const PathInfo& p) {
  mad::wire::CmPath w;
  w.local_lid = p.local_lid;
  w.remote_lid = p.remote_lid;
  w.local_gid = p.local_gid;
  w.remote_gid = p.remote_gid;
  w.flow_label = p.flow_label;
  w.packet_rate = p.packet_rate;
  w.traffic_class = p.traffic_class;
  w.hop_limit = p.hop_limit;
  w.sl = p.sl;
  w.subnet_local = p.subnet_local;
  w.local_ack_timeout = p.local_ack_timeout;
  return w;
}

// A wire path seen by its receiver: "local" becomes the remote end.
inline PathInfo FromWireSwapped(const mad::wire::CmPath& w) {
  PathInfo p;
  p.local_lid = w.remote_lid;
  p.remote_lid = w.local_lid;
  p.local_gid = w.remote_gid;
  p.remote_gid = w.local_gid;
  p.flow_label = w.flow_label;
  p.packet_rate = w.packet_rate;
  p.traffic_class = w.traffic_class;
  p.hop_limit = w.hop_limit;
  p.sl = w.sl;
  p.subnet_local = w.subnet_local;
  p.local_ack_timeout = w.local_ack_timeout;
  return p;
}

// As sent (for events that report what the peer asked for).
inline PathInfo FromWire(const mad::wire::CmPath& w) {
  PathInfo p = FromWireSwapped(w);
  std::swap(p.local_lid, p.remote_lid);
  std::swap(p.local_gid, p.remote_gid);
  return p;
}

}  // namespace internal

template <typename Repr>
void CmEndpoint::Send(const mad::MadAddress& to, const Repr& r) {
  mad::QueueStorage<OutgoingMad>::Lend(tx_);  // as Queue does (mad/queue_storage.h)
  OutgoingMad& o = tx_.emplace_back();
  o.to = to;
  const absl::Status s = r.Emit(o.mad);
  // Every input was validated by the user call; a failure is our bug.
  assert(s.ok());
  (void)s;
  CountSent(static_cast<mad::wire::CmAttr>(uint16_t{o.mad[16]} << 8 | o.mad[17]));
}

}  // namespace uscm::cm

#endif  // USCM_CM_ENDPOINT_INTERNAL_H_
