#include "mad/wire/cm_path.h"

#include <algorithm>

namespace uscm::mad::wire {
namespace {

Gid ReadGid(const FieldView& v, const Field& f) {
  Gid g;
  const auto b = v.Bytes(f);
  std::copy(b.begin(), b.end(), g.raw.begin());
  return g;
}

}  // namespace

CmPath ReadPath(const FieldView& v, const PathFields& f) {
  CmPath p;
  p.local_lid = v.Get(f.local_lid);
  p.remote_lid = v.Get(f.remote_lid);
  p.local_gid = ReadGid(v, f.local_gid);
  p.remote_gid = ReadGid(v, f.remote_gid);
  p.flow_label = v.Get(f.flow_label);
  p.packet_rate = v.Get(f.packet_rate);
  p.traffic_class = v.Get(f.traffic_class);
  p.hop_limit = v.Get(f.hop_limit);
  p.sl = v.Get(f.sl);
  p.subnet_local = v.Get(f.subnet_local) != 0;
  p.local_ack_timeout = v.Get(f.local_ack_timeout);
  return p;
}

void WritePath(FieldWriter& w, const PathFields& f, const CmPath& p) {
  w.Set(f.local_lid, p.local_lid);
  w.Set(f.remote_lid, p.remote_lid);
  w.SetBytes(f.local_gid, p.local_gid.raw, f.local_gid.name);
  w.SetBytes(f.remote_gid, p.remote_gid.raw, f.remote_gid.name);
  w.Set(f.flow_label, p.flow_label);
  w.Set(f.packet_rate, p.packet_rate);
  w.Set(f.traffic_class, p.traffic_class);
  w.Set(f.hop_limit, p.hop_limit);
  w.Set(f.sl, p.sl);
  w.Set(f.subnet_local, p.subnet_local ? 1 : 0);
  w.Set(f.local_ack_timeout, p.local_ack_timeout);
}

}  // namespace uscm::mad::wire
