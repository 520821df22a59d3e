#include "cm/path_from_record.h"

#include <algorithm>

namespace uscm::cm {

PathInfo PathFromRecord(const mad::wire::PathRecord& r) {
  PathInfo p;
  p.local_lid = r.slid;
  p.remote_lid = r.dlid;
  p.local_gid = r.sgid;
  p.remote_gid = r.dgid;
  p.flow_label = r.flow_label;
  p.packet_rate = r.rate;
  p.traffic_class = r.tclass;
  p.hop_limit = r.hop_limit;
  p.sl = r.sl;
  p.subnet_local = r.hop_limit <= 1;
  p.packet_life_time = r.packet_life_time;
  p.local_ack_timeout = static_cast<uint8_t>(std::min(31, r.packet_life_time + 1));
  p.mtu = static_cast<uint8_t>(r.mtu);
  return p;
}

}  // namespace uscm::cm
