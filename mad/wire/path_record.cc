#include "mad/wire/path_record.h"

#include <algorithm>

namespace uscm::mad::wire {

namespace {
constexpr const char* kMaskNames[] = {
    "ServiceID(MSB)", "ServiceID(LSB)", "DGID",         "SGID",
    "DLID",           "SLID",           "RawTraffic",   nullptr,
    "FlowLabel",      "HopLimit",       "TClass",       "Reversible",
    "NumbPath",       "P_Key",          "QoSClass",     "SL",
    "MTUSelector",    "MTU",            "RateSelector", "Rate",
    "PacketLifeTimeSelector", "PacketLifeTime", "Preference",
};

Gid ReadGid(const FieldView& v, const Field& f) {
  Gid g;
  std::copy_n(v.Bytes(f).begin(), g.raw.size(), g.raw.begin());
  return g;
}
}  // namespace

std::vector<std::string> PathRecordMask::Names() const {
  uint64_t rest = bits();
  std::vector<std::string> out;
  if (Has(kServiceId)) {
    out.emplace_back("ServiceID");
    rest &= ~kServiceId.bits();
  }
  for (std::string& n : MaskBitNames(rest, kMaskNames)) out.push_back(std::move(n));
  return out;
}

PathRecord PathRecord::Read(const FieldView& v) {
  using namespace path_record;  // NOLINT: the table's row names
  PathRecord r;
  r.service_id = v.Get(kServiceId);
  r.dgid = ReadGid(v, kDgid);
  r.sgid = ReadGid(v, kSgid);
  r.dlid = v.Get(kDlid);
  r.slid = v.Get(kSlid);
  r.raw_traffic = v.Get(kRawTraffic);
  r.flow_label = v.Get(kFlowLabel);
  r.hop_limit = v.Get(kHopLimit);
  r.tclass = v.Get(kTClass);
  r.reversible = v.Get(kReversible);
  r.numb_path = v.Get(kNumbPath);
  r.pkey = v.Get(kPKey);
  r.qos_class = v.Get(kQosClass);
  r.sl = v.Get(kSl);
  r.mtu_selector = static_cast<Selector>(v.Get(kMtuSelector));
  r.mtu = static_cast<Mtu>(v.Get(kMtu));
  r.rate_selector = static_cast<Selector>(v.Get(kRateSelector));
  r.rate = v.Get(kRate);
  r.packet_life_time_selector = static_cast<Selector>(v.Get(kPacketLifeTimeSelector));
  r.packet_life_time = v.Get(kPacketLifeTime);
  r.preference = v.Get(kPreference);
  return r;
}

void PathRecord::Write(FieldWriter& w) const {
  using namespace path_record;  // NOLINT: the table's row names
  w.Zero(kReserved44);
  w.Zero(kReserved58);
  w.Set(kServiceId, service_id);
  w.SetBytes(kDgid, dgid.raw);
  w.SetBytes(kSgid, sgid.raw);
  w.Set(kDlid, dlid);
  w.Set(kSlid, slid);
  w.Set(kRawTraffic, raw_traffic);
  w.Set(kFlowLabel, flow_label);
  w.Set(kHopLimit, hop_limit);
  w.Set(kTClass, tclass);
  w.Set(kReversible, reversible);
  w.Set(kNumbPath, numb_path);
  w.Set(kPKey, pkey);
  w.Set(kQosClass, qos_class);
  w.Set(kSl, sl);
  w.Set(kMtuSelector, static_cast<uint8_t>(mtu_selector));
  w.Set(kMtu, static_cast<uint8_t>(mtu));
  w.Set(kRateSelector, static_cast<uint8_t>(rate_selector));
  w.Set(kRate, rate);
  w.Set(kPacketLifeTimeSelector, static_cast<uint8_t>(packet_life_time_selector));
  w.Set(kPacketLifeTime, packet_life_time);
  w.Set(kPreference, preference);
}

absl::StatusOr<PathRecord> PathRecord::Parse(std::span<const uint8_t> record) {
  if (absl::Status s = CheckRecordLength(kName, path_record::kRows, record.size(), kBytes);
      !s.ok()) {
    return s;
  }
  return Read(FieldView::Unchecked(record.data()));
}

absl::Status PathRecord::Emit(std::span<uint8_t> record) const {
  if (absl::Status s = CheckRecordOutput(kName, record.size(), kBytes); !s.ok()) return s;
  FieldWriter w(kName, record.data());
  Write(w);
  return w.status();
}

}  // namespace uscm::mad::wire
