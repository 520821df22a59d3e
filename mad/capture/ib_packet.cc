#include "mad/capture/ib_packet.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/capture/ib_crc.h"

namespace uscm::mad::capture {
namespace {

void Put16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  Put16(p, v >> 16);
  Put16(p + 2, v);
}
uint32_t Get16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t Get24(const uint8_t* p) { return (uint32_t{p[0]} << 16) | Get16(p + 1); }
uint32_t Get32(const uint8_t* p) { return (Get16(p) << 16) | Get16(p + 2); }

// Little-endian: how rxe stores the ICRC, and how we store the VCRC.
void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetLe32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
         (uint32_t{p[3]} << 24);
}

absl::Status CheckRange(const char* field, uint64_t value, uint64_t max) {
  if (value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s is 0x%x; the field holds at most 0x%x", field, value, max));
}

absl::Status CheckHeaders(const UdHeaders& h) {
  for (const absl::Status& s :
       {CheckRange("LRH VL", h.vl, 0xF), CheckRange("LRH SL", h.sl, 0xF),
        CheckRange("BTH DestQP", h.dest_qpn, 0xFFFFFF),
        CheckRange("BTH PSN", h.psn, 0xFFFFFF),
        CheckRange("DETH SrcQP", h.src_qpn, 0xFFFFFF),
        CheckRange("GRH FlowLabel", h.grh ? h.grh->flow_label : 0, 0xFFFFF)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

size_t HeadersSize(const UdHeaders& headers) {
  return kLrhSize + (headers.grh ? kGrhSize : 0) + kBthSize + kDethSize;
}

size_t MaxPayloadSize(const UdHeaders& headers) {
  return kMaxPktLenWords * 4 - HeadersSize(headers) - kIcrcSize;
}

uint32_t ComputeIcrc(std::span<const uint8_t> packet, size_t icrc_offset) {
  // IBA 7.8.1: every LRH field is variant, so the LRH counts as 8 bytes of
  // 1s; GRH TClass, FlowLabel and HopLmt and BTH Resv8a are variant too.
  static constexpr std::array<uint8_t, kLrhSize> kMaskedLrh = {
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  uint32_t crc = Crc32(kMaskedLrh);
  const bool has_grh = (packet[1] & 0x3) == kLnhIbaGrh;
  size_t pos = kLrhSize;
  std::array<uint8_t, kGrhSize + kBthSize> masked{};
  size_t n = 0;
  if (has_grh) {
    std::memcpy(masked.data(), packet.data() + pos, kGrhSize);
    masked[0] |= 0x0F;  // IPVer kept, TClass high nibble masked
    masked[1] = masked[2] = masked[3] = 0xFF;  // TClass low nibble, FlowLabel
    masked[7] = 0xFF;   // HopLmt
    n = kGrhSize;
    pos += kGrhSize;
  }
  std::memcpy(masked.data() + n, packet.data() + pos, kBthSize);
  masked[n + 4] = 0xFF;  // BTH Resv8a
  n += kBthSize;
  pos += kBthSize;
  crc = Crc32(std::span<const uint8_t>(masked.data(), n), crc);
  return Crc32(packet.subspan(pos, icrc_offset - pos), crc);
}

absl::StatusOr<std::vector<uint8_t>> WrapMad(const UdHeaders& h,
                                             std::span<const uint8_t> mad) {
  if (absl::Status s = CheckHeaders(h); !s.ok()) return s;
  if (mad.empty()) return absl::InvalidArgumentError("MAD is empty");
  if (mad.size() > MaxPayloadSize(h)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MAD is ", mad.size(), " bytes; one packet with these headers carries at most ",
        MaxPayloadSize(h), " (LRH PktLen is 11 bits of 4-byte words)"));
  }
  const size_t pad = (4 - mad.size() % 4) % 4;
  const size_t hdrs = HeadersSize(h);
  const size_t icrc_offset = hdrs + mad.size() + pad;
  std::vector<uint8_t> p(icrc_offset + kIcrcSize + kVcrcSize, 0);
  uint8_t* lrh = p.data();
  lrh[0] = static_cast<uint8_t>(h.vl << 4);  // LVer 0
  lrh[1] = static_cast<uint8_t>((h.sl << 4) | (h.grh ? kLnhIbaGrh : kLnhIba));
  Put16(lrh + 2, h.dlid);
  Put16(lrh + 4, static_cast<uint32_t>((icrc_offset + kIcrcSize) / 4));
  Put16(lrh + 6, h.slid);
  size_t pos = kLrhSize;
  if (h.grh) {
    uint8_t* grh = p.data() + pos;
    Put32(grh, (6u << 28) | (uint32_t{h.grh->traffic_class} << 20) |
                   h.grh->flow_label);
    Put16(grh + 4, static_cast<uint32_t>(icrc_offset + kIcrcSize - kLrhSize - kGrhSize));
    grh[6] = kGrhNextHeaderIba;
    grh[7] = h.grh->hop_limit;
    std::memcpy(grh + 8, h.grh->sgid.raw.data(), 16);
    std::memcpy(grh + 24, h.grh->dgid.raw.data(), 16);
    pos += kGrhSize;
  }
  uint8_t* bth = p.data() + pos;
  bth[0] = kOpcodeUdSendOnly;
  bth[1] = static_cast<uint8_t>(pad << 4);  // SE 0, M 0, PadCnt, TVer 0
  Put16(bth + 2, h.pkey);
  Put24(bth + 5, h.dest_qpn);
  Put24(bth + 9, h.psn);
  pos += kBthSize;
  uint8_t* deth = p.data() + pos;
  Put32(deth, h.qkey);
  Put24(deth + 5, h.src_qpn);
  pos += kDethSize;
  std::memcpy(p.data() + pos, mad.data(), mad.size());
  PutLe32(p.data() + icrc_offset, ComputeIcrc(p, icrc_offset));
  const uint16_t vcrc = Vcrc16(std::span<const uint8_t>(p).first(icrc_offset + kIcrcSize));
  p[icrc_offset + kIcrcSize] = static_cast<uint8_t>(vcrc);
  p[icrc_offset + kIcrcSize + 1] = static_cast<uint8_t>(vcrc >> 8);
  return p;
}

absl::StatusOr<ParsedUdPacket> ParseUdPacket(std::span<const uint8_t> p) {
  if (p.size() < kLrhSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packet is ", p.size(), " bytes; an LRH alone is ", kLrhSize));
  }
  if ((p[0] & 0x0F) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LRH LVer is ", p[0] & 0x0F, "; only 0 is defined"));
  }
  const uint8_t lnh = p[1] & 0x3;
  if (lnh != kLnhIba && lnh != kLnhIbaGrh) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LRH LNH is ", lnh, " (", lnh == 0 ? "raw" : "raw IPv6",
        "); only 2 (BTH) and 3 (GRH) carry MADs"));
  }
  ParsedUdPacket out;
  UdHeaders& h = out.headers;
  h.vl = p[0] >> 4;
  h.sl = p[1] >> 4;
  h.dlid = static_cast<uint16_t>(Get16(&p[2]));
  h.slid = static_cast<uint16_t>(Get16(&p[6]));
  const size_t end_of_icrc = (Get16(&p[4]) & kMaxPktLenWords) * 4;
  if (end_of_icrc > p.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LRH PktLen says ", end_of_icrc, " bytes through the ICRC; packet has ",
        p.size()));
  }
  const size_t trailer = p.size() - end_of_icrc;
  if (trailer != 0 && trailer != kVcrcSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packet has ", trailer, " bytes after the ICRC (LRH PktLen ",
        end_of_icrc / 4, " words); expected 0 or a 2-byte VCRC"));
  }
  if (lnh == kLnhIbaGrh) {
    GrhFields g;
    if (end_of_icrc < kLrhSize + kGrhSize) {
      return absl::InvalidArgumentError("LRH LNH says a GRH follows, but PktLen ends inside it");
    }
    const uint8_t* grh = &p[kLrhSize];
    const uint32_t w0 = Get32(grh);
    if ((w0 >> 28) != 6) {
      return absl::InvalidArgumentError(
          absl::StrCat("GRH IPVer is ", w0 >> 28, "; expected 6"));
    }
    if (grh[6] != kGrhNextHeaderIba) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "GRH NxtHdr is 0x%02x; expected 0x1b (IBA transport)", grh[6]));
    }
    const size_t paylen = Get16(grh + 4);
    if (paylen != end_of_icrc - kLrhSize - kGrhSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GRH PayLen is ", paylen, "; LRH PktLen implies ",
          end_of_icrc - kLrhSize - kGrhSize));
    }
    g.traffic_class = static_cast<uint8_t>(w0 >> 20);
    g.flow_label = w0 & 0xFFFFF;
    g.hop_limit = grh[7];
    std::memcpy(g.sgid.raw.data(), grh + 8, 16);
    std::memcpy(g.dgid.raw.data(), grh + 24, 16);
    h.grh = g;
  }
  const size_t hdrs = HeadersSize(h);
  if (end_of_icrc < hdrs + kIcrcSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LRH PktLen is ", end_of_icrc / 4, " words; headers and ICRC alone need ",
        (hdrs + kIcrcSize) / 4));
  }
  const uint8_t* bth = &p[hdrs - kBthSize - kDethSize];
  if (bth[0] != kOpcodeUdSendOnly) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "BTH OpCode is 0x%02x; MADs travel as UD SEND_ONLY (0x64)", bth[0]));
  }
  if ((bth[1] & 0x0F) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BTH TVer is ", bth[1] & 0x0F, "; only 0 is defined"));
  }
  out.pad_count = (bth[1] >> 4) & 0x3;
  h.pkey = static_cast<uint16_t>(Get16(bth + 2));
  h.dest_qpn = Get24(bth + 5);
  h.psn = Get24(bth + 9);
  const uint8_t* deth = bth + kBthSize;
  h.qkey = Get32(deth);
  h.src_qpn = Get24(deth + 5);
  const size_t payload = end_of_icrc - kIcrcSize - hdrs;
  if (payload <= out.pad_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packet carries ", payload, " payload bytes with BTH PadCnt ",
        int{out.pad_count}, "; no MAD left"));
  }
  out.mad_offset = hdrs;
  out.mad = p.subspan(hdrs, payload - out.pad_count);
  const size_t icrc_offset = end_of_icrc - kIcrcSize;
  out.icrc = GetLe32(&p[icrc_offset]);
  out.icrc_ok = out.icrc == ComputeIcrc(p, icrc_offset);
  if (trailer == kVcrcSize) {
    out.has_vcrc = true;
    out.vcrc = static_cast<uint16_t>(p[end_of_icrc] | (p[end_of_icrc + 1] << 8));
    out.vcrc_ok = out.vcrc == Vcrc16(p.first(end_of_icrc));
  }
  return out;
}

UdHeaders OutgoingHeaders(const LocalPort& local, const MadAddress& to,
                          uint32_t local_qpn) {
  UdHeaders h;
  h.sl = to.sl;
  h.dlid = to.lid;
  h.slid = static_cast<uint16_t>(local.lid | to.path_bits);
  h.pkey = to.pkey_index < local.pkeys.size() ? local.pkeys[to.pkey_index] : 0xFFFF;
  h.dest_qpn = to.qpn;
  h.qkey = to.qkey;
  h.src_qpn = local_qpn;
  if (to.has_grh) {
    h.grh = GrhFields{.sgid = local.gid,
                      .dgid = to.gid,
                      .traffic_class = to.traffic_class,
                      .flow_label = to.flow_label,
                      .hop_limit = to.hop_limit};
  }
  return h;
}

UdHeaders IncomingHeaders(const LocalPort& local, const MadAddress& from,
                          uint32_t local_qpn) {
  UdHeaders h;
  h.sl = from.sl;
  h.dlid = static_cast<uint16_t>(local.lid | from.path_bits);
  h.slid = from.lid;
  h.pkey = from.pkey_index < local.pkeys.size() ? local.pkeys[from.pkey_index] : 0xFFFF;
  h.dest_qpn = local_qpn;
  h.qkey = from.qkey;
  h.src_qpn = from.qpn;
  if (from.has_grh) {
    h.grh = GrhFields{.sgid = from.gid,
                      .dgid = local.gid,
                      .traffic_class = from.traffic_class,
                      .flow_label = from.flow_label,
                      .hop_limit = from.hop_limit};
  }
  return h;
}

MadAddress SourceAddress(const UdHeaders& h) {
  MadAddress a;
  a.lid = h.slid;
  a.qpn = h.src_qpn;
  a.qkey = h.qkey;
  a.sl = h.sl;
  if (h.grh) {
    a.has_grh = true;
    a.gid = h.grh->sgid;
    a.hop_limit = h.grh->hop_limit;
    a.traffic_class = h.grh->traffic_class;
    a.flow_label = h.grh->flow_label;
  }
  return a;
}

}  // namespace uscm::mad::capture
