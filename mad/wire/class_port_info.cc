#include "mad/wire/class_port_info.h"

#include <algorithm>

namespace uscm::mad::wire {

namespace {
Gid ReadGid(const FieldView& v, const Field& f) {
  Gid g;
  std::copy_n(v.Bytes(f).begin(), g.raw.size(), g.raw.begin());
  return g;
}
}  // namespace

ClassPortInfo ClassPortInfo::Read(const FieldView& v) {
  using namespace class_port_info;  // NOLINT: the table's row names
  ClassPortInfo c;
  c.base_version = v.Get(kBaseVersion);
  c.class_version = v.Get(kClassVersion);
  c.capability_mask = v.Get(kCapabilityMask);
  c.capability_mask2 = v.Get(kCapabilityMask2);
  c.resp_time_value = v.Get(kRespTimeValue);
  c.redirect_gid = ReadGid(v, kRedirectGid);
  c.redirect_tc = v.Get(kRedirectTc);
  c.redirect_sl = v.Get(kRedirectSl);
  c.redirect_fl = v.Get(kRedirectFl);
  c.redirect_lid = v.Get(kRedirectLid);
  c.redirect_pkey = v.Get(kRedirectPKey);
  c.redirect_qp = v.Get(kRedirectQp);
  c.redirect_qkey = v.Get(kRedirectQKey);
  c.trap_gid = ReadGid(v, kTrapGid);
  c.trap_tc = v.Get(kTrapTc);
  c.trap_sl = v.Get(kTrapSl);
  c.trap_fl = v.Get(kTrapFl);
  c.trap_lid = v.Get(kTrapLid);
  c.trap_pkey = v.Get(kTrapPKey);
  c.trap_hl = v.Get(kTrapHl);
  c.trap_qp = v.Get(kTrapQp);
  c.trap_qkey = v.Get(kTrapQKey);
  return c;
}

void ClassPortInfo::Write(FieldWriter& w) const {
  using namespace class_port_info;  // NOLINT: the table's row names
  w.Zero(kReserved32);
  w.Set(kBaseVersion, base_version);
  w.Set(kClassVersion, class_version);
  w.Set(kCapabilityMask, capability_mask);
  w.Set(kCapabilityMask2, capability_mask2);
  w.Set(kRespTimeValue, resp_time_value);
  w.SetBytes(kRedirectGid, redirect_gid.raw);
  w.Set(kRedirectTc, redirect_tc);
  w.Set(kRedirectSl, redirect_sl);
  w.Set(kRedirectFl, redirect_fl);
  w.Set(kRedirectLid, redirect_lid);
  w.Set(kRedirectPKey, redirect_pkey);
  w.Set(kRedirectQp, redirect_qp);
  w.Set(kRedirectQKey, redirect_qkey);
  w.SetBytes(kTrapGid, trap_gid.raw);
  w.Set(kTrapTc, trap_tc);
  w.Set(kTrapSl, trap_sl);
  w.Set(kTrapFl, trap_fl);
  w.Set(kTrapLid, trap_lid);
  w.Set(kTrapPKey, trap_pkey);
  w.Set(kTrapHl, trap_hl);
  w.Set(kTrapQp, trap_qp);
  w.Set(kTrapQKey, trap_qkey);
}

absl::StatusOr<ClassPortInfo> ClassPortInfo::Parse(std::span<const uint8_t> attribute) {
  if (absl::Status s =
          CheckRecordLength(kName, class_port_info::kRows, attribute.size(), kBytes);
      !s.ok()) {
    return s;
  }
  return Read(FieldView::Unchecked(attribute.data()));
}

absl::Status ClassPortInfo::Emit(std::span<uint8_t> attribute) const {
  if (absl::Status s = CheckRecordOutput(kName, attribute.size(), kBytes); !s.ok()) return s;
  FieldWriter w(kName, attribute.data());
  Write(w);
  return w.status();
}

}  // namespace uscm::mad::wire
