#include "mad/wire/mcmember_record.h"

#include <algorithm>

namespace uscm::mad::wire {

namespace {
constexpr const char* kMaskNames[] = {
    "MGID",  "PortGID",      "Q_Key",          "MLID",     "MTUSelector",
    "MTU",   "TClass",       "P_Key",          "RateSelector", "Rate",
    "PacketLifeTimeSelector", "PacketLifeTime", "SL",      "FlowLabel",
    "HopLimit", "Scope",     "JoinState",      "ProxyJoin",
};

Gid ReadGid(const FieldView& v, const Field& f) {
  Gid g;
  std::copy_n(v.Bytes(f).begin(), g.raw.size(), g.raw.begin());
  return g;
}
}  // namespace

std::vector<std::string> McMemberRecordMask::Names() const {
  return MaskBitNames(bits(), kMaskNames);
}

std::string JoinState::ToString() const {
  static constexpr const char* kNames[] = {"FullMember", "NonMember", "SendOnlyNonMember",
                                           "SendOnlyFullMember"};
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if ((bits_ >> i & 1) == 0) continue;
    if (!out.empty()) out += "|";
    out += kNames[i];
  }
  return out.empty() ? "none" : out;
}

McMemberRecord McMemberRecord::Read(const FieldView& v) {
  using namespace mcmember_record;  // NOLINT: the table's row names
  McMemberRecord r;
  r.mgid = ReadGid(v, kMgid);
  r.port_gid = ReadGid(v, kPortGid);
  r.qkey = v.Get(kQKey);
  r.mlid = v.Get(kMlid);
  r.mtu_selector = static_cast<Selector>(v.Get(kMtuSelector));
  r.mtu = static_cast<Mtu>(v.Get(kMtu));
  r.tclass = v.Get(kTClass);
  r.pkey = v.Get(kPKey);
  r.rate_selector = static_cast<Selector>(v.Get(kRateSelector));
  r.rate = v.Get(kRate);
  r.packet_life_time_selector = static_cast<Selector>(v.Get(kPacketLifeTimeSelector));
  r.packet_life_time = v.Get(kPacketLifeTime);
  r.sl = v.Get(kSl);
  r.flow_label = v.Get(kFlowLabel);
  r.hop_limit = v.Get(kHopLimit);
  r.scope = static_cast<McScope>(v.Get(kScope));
  r.join_state = JoinState(static_cast<uint8_t>(v.Get(kJoinState)));
  r.proxy_join = v.Get(kProxyJoin);
  return r;
}

void McMemberRecord::Write(FieldWriter& w) const {
  using namespace mcmember_record;  // NOLINT: the table's row names
  w.Zero(kReserved49);
  w.SetBytes(kMgid, mgid.raw);
  w.SetBytes(kPortGid, port_gid.raw);
  w.Set(kQKey, qkey);
  w.Set(kMlid, mlid);
  w.Set(kMtuSelector, static_cast<uint8_t>(mtu_selector));
  w.Set(kMtu, static_cast<uint8_t>(mtu));
  w.Set(kTClass, tclass);
  w.Set(kPKey, pkey);
  w.Set(kRateSelector, static_cast<uint8_t>(rate_selector));
  w.Set(kRate, rate);
  w.Set(kPacketLifeTimeSelector, static_cast<uint8_t>(packet_life_time_selector));
  w.Set(kPacketLifeTime, packet_life_time);
  w.Set(kSl, sl);
  w.Set(kFlowLabel, flow_label);
  w.Set(kHopLimit, hop_limit);
  w.Set(kScope, static_cast<uint8_t>(scope));
  w.Set(kJoinState, join_state.bits());
  w.Set(kProxyJoin, proxy_join);
}

absl::StatusOr<McMemberRecord> McMemberRecord::Parse(std::span<const uint8_t> record) {
  if (absl::Status s =
          CheckRecordLength(kName, mcmember_record::kRows, record.size(), kBytes);
      !s.ok()) {
    return s;
  }
  return Read(FieldView::Unchecked(record.data()));
}

absl::Status McMemberRecord::Emit(std::span<uint8_t> record) const {
  if (absl::Status s = CheckRecordOutput(kName, record.size(), kBytes); !s.ok()) return s;
  FieldWriter w(kName, record.data());
  Write(w);
  return w.status();
}

}  // namespace uscm::mad::wire
