#include "mad/capture/frame_decode.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_format.h"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/roce_frame.h"

namespace uscm::mad::capture {
namespace {

constexpr size_t kMadBytes = 256;
constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherArp = 0x0806;
constexpr uint16_t kEtherIpv6 = 0x86DD;
constexpr uint16_t kEtherRoceV1 = 0x8915;
constexpr uint16_t kEtherVlan = 0x8100;
constexpr uint16_t kEtherQinQ = 0x88A8;
constexpr size_t kGrhBytes = 40, kBthBytes = 12, kDethBytes = 8, kIcrcBytes = 4;

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t Be24(const uint8_t* p) { return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]; }

std::string Ip6Text(const uint8_t* raw) {
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, raw, buf, sizeof(buf)) != nullptr ? buf : "?";
}

// "192.168.1.10" for an IPv4-mapped address, else IPv6 text.
std::string IpText(const std::array<uint8_t, 16>& ip, bool ipv6) {
  if (!ipv6) return absl::StrFormat("%d.%d.%d.%d", ip[12], ip[13], ip[14], ip[15]);
  return Ip6Text(ip.data());
}

// The transport of a BTH opcode (IBA Vol 1 §9.2: the top three bits).
const char* Transport(uint8_t opcode) {
  switch (opcode >> 5) {
    case 0: return "RC";
    case 1: return "UC";
    case 2: return "RD";
    case 3: return "UD";
    case 4: return "CNP";
    case 5: return "XRC";
    default: return "vendor";
  }
}

bool IsUdSend(uint8_t opcode) {
  return opcode == kBthOpcodeUdSendOnly || opcode == kBthOpcodeUdSendOnlyImm;
}

// A UD payload that is a MAD: 256 bytes (or more: padding), base version 1.
bool LooksLikeMad(std::span<const uint8_t> payload) {
  return payload.size() >= kMadBytes && payload[0] == 1;
}

DecodedFrame NotMad(std::string kind, std::string detail) {
  DecodedFrame f;
  f.kind = std::move(kind);
  f.detail = std::move(detail);
  return f;
}

DecodedFrame NotMadTransport(const std::string& framing, uint8_t opcode, uint32_t dest_qp,
                             size_t payload) {
  return NotMad(absl::StrCat(framing, " ", Transport(opcode)),
                absl::StrFormat("%s %s opcode 0x%02x to QP 0x%06x, %d payload bytes", framing,
                                Transport(opcode), opcode, dest_qp, payload));
}

absl::StatusOr<DecodedFrame> DecodeNativeIb(std::span<const uint8_t> p) {
  // LRH: LNH (byte 1, low 2 bits) 2 = BTH follows, 3 = GRH then BTH.
  if (p.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat("IB packet of ", p.size(),
                                                   " bytes is shorter than its LRH (8)"));
  }
  const uint8_t lnh = p[1] & 0x3;
  if (lnh < 2) return NotMad("IB raw", absl::StrCat("IB raw packet (LNH ", lnh, ")"));
  const size_t bth = 8 + (lnh == 3 ? kGrhBytes : 0);
  if (p.size() < bth + kBthBytes) {
    return absl::InvalidArgumentError(absl::StrCat("IB packet of ", p.size(),
                                                   " bytes ends inside its BTH"));
  }
  const uint8_t opcode = p[bth];
  if (!IsUdSend(opcode)) {
    return NotMadTransport("IB", opcode, Be24(&p[bth + 5]), p.size() - bth - kBthBytes);
  }
  absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(p);
  if (!parsed.ok()) return parsed.status();
  if (!LooksLikeMad(parsed->mad)) {
    return NotMad("IB UD", absl::StrFormat("IB UD to QP 0x%06x, %d bytes (not a MAD)",
                                           parsed->headers.dest_qpn, parsed->mad.size()));
  }
  DecodedFrame f;
  f.is_mad = true;
  f.framing = "IB";
  f.src = absl::StrCat(parsed->headers.slid);
  f.dst = absl::StrCat(parsed->headers.dlid);
  f.dest_qp = parsed->headers.dest_qpn;
  f.mad.assign(parsed->mad.begin(), parsed->mad.begin() + kMadBytes);
  f.icrc_ok = parsed->icrc_ok;
  return f;
}

absl::StatusOr<DecodedFrame> DecodeRoceV2(std::span<const uint8_t> ethernet) {
  absl::StatusOr<RoceV2Frame> r = ParseRoceV2Frame(ethernet);
  if (!r.ok()) return r.status();
  if (!IsUdSend(r->opcode)) {
    return NotMadTransport("RoCE v2", r->opcode, r->dest_qp, r->payload.size());
  }
  if (!LooksLikeMad(r->payload)) {
    return NotMad("RoCE v2 UD", absl::StrFormat("RoCE v2 UD to QP 0x%06x, %d bytes (not a MAD)",
                                                r->dest_qp, r->payload.size()));
  }
  DecodedFrame f;
  f.is_mad = true;
  f.framing = "RoCE v2";
  f.src = IpText(r->src_ip, r->ipv6);
  f.dst = IpText(r->dst_ip, r->ipv6);
  f.dest_qp = r->dest_qp;
  f.mad.assign(r->payload.begin(), r->payload.begin() + kMadBytes);
  return f;
}

// RoCE v1: GRH (40) | BTH (12) | DETH (8) | MAD | ICRC (4) after the EtherType.
absl::StatusOr<DecodedFrame> DecodeRoceV1(std::span<const uint8_t> p) {
  if (p.size() < kGrhBytes + kBthBytes) {
    return absl::InvalidArgumentError(absl::StrCat("RoCE v1 frame has ", p.size(),
                                                   " bytes after the EtherType; GRH + BTH "
                                                   "need 52"));
  }
  const size_t pay_len = Be16(&p[4]);  // GRH PayLen: BTH through ICRC
  const size_t end = std::min(p.size(), kGrhBytes + pay_len);
  const uint8_t* bth = &p[kGrhBytes];
  const uint8_t opcode = bth[0];
  const uint32_t dest_qp = Be24(bth + 5);
  if (!IsUdSend(opcode)) {
    return NotMadTransport("RoCE v1", opcode, dest_qp,
                           end > kGrhBytes + kBthBytes + kIcrcBytes
                               ? end - kGrhBytes - kBthBytes - kIcrcBytes
                               : 0);
  }
  const size_t mad_at = kGrhBytes + kBthBytes + kDethBytes + (opcode == 0x65 ? 4 : 0);
  if (end < mad_at + kIcrcBytes) {
    return absl::InvalidArgumentError(absl::StrCat("RoCE v1 UD frame ends at byte ", end,
                                                   " before its DETH and ICRC"));
  }
  std::span<const uint8_t> payload = p.subspan(mad_at, end - kIcrcBytes - mad_at);
  if (!LooksLikeMad(payload)) {
    return NotMad("RoCE v1 UD", absl::StrFormat("RoCE v1 UD to QP 0x%06x, %d bytes (not a MAD)",
                                                dest_qp, payload.size()));
  }
  DecodedFrame f;
  f.is_mad = true;
  f.framing = "RoCE v1";
  f.src = Ip6Text(&p[8]);
  f.dst = Ip6Text(&p[24]);
  f.dest_qp = dest_qp;
  f.mad.assign(payload.begin(), payload.begin() + kMadBytes);
  return f;
}

// After the MAC addresses (or the cooked header): VLAN tags, then `type` at
// `pos`. Rebuilds an untagged Ethernet frame for ParseRoceV2Frame.
absl::StatusOr<DecodedFrame> DecodeEtherPayload(std::span<const uint8_t> data, size_t pos,
                                                std::span<const uint8_t> macs) {
  while (data.size() >= pos + 2 &&
         (Be16(&data[pos]) == kEtherVlan || Be16(&data[pos]) == kEtherQinQ)) {
    pos += 4;  // a tag is TPID + TCI; the inner EtherType follows
  }
  if (data.size() < pos + 2) {
    return NotMad("short", absl::StrCat("frame of ", data.size(), " bytes ends before its "
                                        "EtherType"));
  }
  const uint16_t type = Be16(&data[pos]);
  std::span<const uint8_t> l3 = data.subspan(pos + 2);
  switch (type) {
    case kEtherArp:
      return NotMad("ARP", "ARP");
    case kEtherRoceV1:
      return DecodeRoceV1(l3);
    case kEtherIpv4:
    case kEtherIpv6: {
      const bool v6 = type == kEtherIpv6;
      const uint8_t proto = v6 ? (l3.size() > 6 ? l3[6] : 0) : (l3.size() > 9 ? l3[9] : 0);
      const char* ip = v6 ? "IPv6" : "IPv4";
      if (proto != 17) {
        const char* name = proto == 6    ? "TCP"
                           : proto == 1  ? "ICMP"
                           : proto == 58 ? "ICMPv6"
                                         : nullptr;
        const std::string kind =
            name != nullptr ? absl::StrCat(ip, " ", name) : absl::StrCat(ip, " protocol ", proto);
        return NotMad(kind, kind);
      }
      // Untagged Ethernet (MACs, type, IP...) for the RoCE v2 parser.
      std::vector<uint8_t> frame(macs.begin(), macs.end());
      frame.resize(12, 0);
      frame.push_back(data[pos]);
      frame.push_back(data[pos + 1]);
      frame.insert(frame.end(), l3.begin(), l3.end());
      absl::StatusOr<DecodedFrame> d = DecodeRoceV2(frame);
      if (d.ok() || d.status().code() != absl::StatusCode::kNotFound) return d;
      return NotMad(absl::StrCat(ip, " UDP"), absl::StrCat(ip, " UDP: ", d.status().message()));
    }
    default:
      return NotMad(absl::StrFormat("EtherType 0x%04x", type),
                    absl::StrFormat("EtherType 0x%04x", type));
  }
}

}  // namespace

bool IsSupportedLinkType(uint32_t link_type) {
  return link_type == kLinkTypeEthernet || link_type == kLinkTypeLinuxSll ||
         link_type == kLinkTypeErf || link_type == kLinkTypeExportedPdu;
}

absl::StatusOr<DecodedFrame> DecodeFrame(uint32_t link_type, std::span<const uint8_t> data) {
  switch (link_type) {
    case kLinkTypeEthernet:
      if (data.size() < 14) {
        return NotMad("short", absl::StrCat("Ethernet frame of ", data.size(), " bytes"));
      }
      return DecodeEtherPayload(data, 12, data.first(12));
    case kLinkTypeLinuxSll:  // 16-byte cooked header, protocol at bytes 14..15
      if (data.size() < 16) {
        return NotMad("short", absl::StrCat("cooked frame of ", data.size(), " bytes"));
      }
      return DecodeEtherPayload(data, 14, {});
    case kLinkTypeErf:
    case kLinkTypeExportedPdu: {
      auto where = LocateIbPacket(static_cast<CaptureLinkType>(link_type), data, kNoRecordIndex);
      if (!where.ok()) return where.status();
      return DecodeNativeIb(data.subspan(where->first, where->second));
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "link type ", link_type, " is not supported (1 Ethernet, 113 Linux cooked, "
          "197 ERF, 252 exported PDU)"));
  }
}

}  // namespace uscm::mad::capture
