#include "mad/capture/roce_frame.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace uscm::mad::capture {

namespace {

constexpr size_t kEthHeader = 14;
constexpr size_t kVlanTag = 4;
constexpr size_t kIpv4MinHeader = 20;
constexpr size_t kIpv6Header = 40;
constexpr size_t kUdpHeader = 8;
constexpr size_t kBth = 12;
constexpr size_t kDeth = 8;
constexpr size_t kIcrc = 4;
constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86DD;
constexpr uint16_t kEtherVlan = 0x8100;
constexpr uint8_t kIpProtoUdp = 17;

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t Be24(const uint8_t* p) { return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]; }
uint32_t Be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | Be24(p + 1); }

absl::Status Short(const char* header, size_t need, size_t have) {
  return absl::InvalidArgumentError(absl::StrCat("RoCE v2 frame: ", header, " needs ", need,
                                                 " bytes; ", have, " remain"));
}

}  // namespace

absl::StatusOr<RoceV2Frame> ParseRoceV2Frame(std::span<const uint8_t> f) {
  RoceV2Frame r;
  if (f.size() < kEthHeader) {
    return absl::NotFoundError(absl::StrCat("frame of ", f.size(), " bytes is no Ethernet frame"));
  }
  std::copy_n(f.begin(), 6, r.dst_mac.begin());
  std::copy_n(f.begin() + 6, 6, r.src_mac.begin());
  size_t pos = 12;
  uint16_t type = Be16(&f[pos]);
  pos += 2;
  if (type == kEtherVlan) {
    if (f.size() < pos + kVlanTag) return Short("VLAN tag", kVlanTag, f.size() - pos);
    type = Be16(&f[pos + 2]);
    pos += kVlanTag;
  }
  uint8_t proto = 0;
  size_t ip_end = f.size();
  if (type == kEtherIpv4) {
    if (f.size() - pos < kIpv4MinHeader) return Short("IPv4 header", kIpv4MinHeader, f.size() - pos);
    const uint8_t* ip = &f[pos];
    const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
    if ((ip[0] >> 4) != 4 || ihl < kIpv4MinHeader || f.size() - pos < ihl) {
      return absl::InvalidArgumentError(absl::StrCat("RoCE v2 frame: IPv4 version/IHL byte 0x",
                                                     absl::Hex(ip[0]), " is invalid"));
    }
    r.traffic_class = ip[1];
    r.hop_limit = ip[8];
    proto = ip[9];
    r.src_ip[10] = r.src_ip[11] = r.dst_ip[10] = r.dst_ip[11] = 0xFF;
    std::copy_n(ip + 12, 4, r.src_ip.begin() + 12);
    std::copy_n(ip + 16, 4, r.dst_ip.begin() + 12);
    ip_end = std::min(f.size(), pos + Be16(ip + 2));  // drop Ethernet padding
    pos += ihl;
  } else if (type == kEtherIpv6) {
    if (f.size() - pos < kIpv6Header) return Short("IPv6 header", kIpv6Header, f.size() - pos);
    const uint8_t* ip = &f[pos];
    r.ipv6 = true;
    r.traffic_class = static_cast<uint8_t>((ip[0] & 0x0F) << 4 | ip[1] >> 4);
    proto = ip[6];
    r.hop_limit = ip[7];
    std::copy_n(ip + 8, 16, r.src_ip.begin());
    std::copy_n(ip + 24, 16, r.dst_ip.begin());
    ip_end = std::min(f.size(), pos + kIpv6Header + Be16(ip + 4));
    pos += kIpv6Header;
  } else {
    return absl::NotFoundError(absl::StrCat("EtherType 0x", absl::Hex(type, absl::kZeroPad4),
                                            " is not IP"));
  }
  if (proto != kIpProtoUdp) {
    return absl::NotFoundError(absl::StrCat("IP protocol ", proto, " is not UDP"));
  }
  if (ip_end - pos < kUdpHeader) return Short("UDP header", kUdpHeader, ip_end - pos);
  r.src_port = Be16(&f[pos]);
  r.dst_port = Be16(&f[pos + 2]);
  if (r.dst_port != kRoceV2UdpPort) {
    return absl::NotFoundError(absl::StrCat("UDP port ", r.dst_port, " is not RoCE v2 (4791)"));
  }
  pos += kUdpHeader;
  if (ip_end - pos < kBth + kIcrc) return Short("BTH + ICRC", kBth + kIcrc, ip_end - pos);
  const uint8_t* bth = &f[pos];
  r.opcode = bth[0];
  r.solicited_event = (bth[1] & 0x80) != 0;
  r.pkey = Be16(bth + 2);
  r.dest_qp = Be24(bth + 5);
  r.ack_request = (bth[8] & 0x80) != 0;
  r.psn = Be24(bth + 9);
  pos += kBth;
  if (r.opcode == kBthOpcodeUdSendOnly || r.opcode == kBthOpcodeUdSendOnlyImm) {
    if (ip_end - pos < kDeth + kIcrc) return Short("DETH + ICRC", kDeth + kIcrc, ip_end - pos);
    r.has_deth = true;
    r.qkey = Be32(&f[pos]);
    r.src_qp = Be24(&f[pos + 5]);
    pos += kDeth;
    if (r.opcode == kBthOpcodeUdSendOnlyImm) {
      if (ip_end - pos < 4 + kIcrc) return Short("ImmDt + ICRC", 4 + kIcrc, ip_end - pos);
      pos += 4;
    }
  }
  r.icrc = Be32(&f[ip_end - kIcrc]);
  r.payload = f.subspan(pos, ip_end - kIcrc - pos);
  return r;
}

}  // namespace uscm::mad::capture
