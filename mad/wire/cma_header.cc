#include "mad/wire/cma_header.h"

#include <arpa/inet.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {
namespace {

uint32_t Ipv4Of(const std::array<uint8_t, 16>& slot) {
  return uint32_t{slot[12]} << 24 | uint32_t{slot[13]} << 16 | uint32_t{slot[14]} << 8 |
         slot[15];
}

std::array<uint8_t, 16> SlotOf(uint32_t v4) {
  std::array<uint8_t, 16> s{};
  s[12] = static_cast<uint8_t>(v4 >> 24);
  s[13] = static_cast<uint8_t>(v4 >> 16);
  s[14] = static_cast<uint8_t>(v4 >> 8);
  s[15] = static_cast<uint8_t>(v4);
  return s;
}

std::string AddrText(uint8_t ip_version, const std::array<uint8_t, 16>& slot) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ip_version == 4) {
    inet_ntop(AF_INET, slot.data() + 12, buf, sizeof(buf));
    return buf;
  }
  inet_ntop(AF_INET6, slot.data(), buf, sizeof(buf));
  return absl::StrFormat("[%s]", buf);
}

}  // namespace

const char* PortSpaceName(PortSpace ps) {
  switch (ps) {
    case PortSpace::kIpoib: return "RDMA_PS_IPOIB";
    case PortSpace::kTcp: return "RDMA_PS_TCP";
    case PortSpace::kUdp: return "RDMA_PS_UDP";
    case PortSpace::kIb: return "RDMA_PS_IB";
  }
  return nullptr;
}

absl::optional<ServiceIdParts> SplitServiceId(uint64_t service_id) {
  if (service_id >> 32 != 0) return absl::nullopt;
  return ServiceIdParts{static_cast<PortSpace>(service_id >> 16 & 0xFFFF),
                        static_cast<uint16_t>(service_id & 0xFFFF)};
}

CmaHeader CmaHeader::Ipv4(uint32_t src, uint16_t src_port, uint32_t dst) {
  CmaHeader h;
  h.ip_version = 4;
  h.src_port = src_port;
  h.src_addr = SlotOf(src);
  h.dst_addr = SlotOf(dst);
  return h;
}

CmaHeader CmaHeader::Ipv6(const std::array<uint8_t, 16>& src, uint16_t src_port,
                          const std::array<uint8_t, 16>& dst) {
  CmaHeader h;
  h.ip_version = 6;
  h.src_port = src_port;
  h.src_addr = src;
  h.dst_addr = dst;
  return h;
}

uint32_t CmaHeader::src_ipv4() const { return Ipv4Of(src_addr); }
uint32_t CmaHeader::dst_ipv4() const { return Ipv4Of(dst_addr); }

std::string CmaHeader::ToString() const {
  return absl::StrFormat("%s:%d -> %s", AddrText(ip_version, src_addr), src_port,
                         AddrText(ip_version, dst_addr));
}

absl::StatusOr<CmaHeader> CmaHeader::Parse(std::span<const uint8_t> private_data) {
  if (private_data.size() < cma::kHeaderBytes) {
    // TruncationError speaks in MAD bytes; the header is relative to the
    // private data, so build the message here with the same shape.
    const Field* cut = nullptr;
    for (const Field& f : cma::kRows) {
      if (f.end_byte() > private_data.size() &&
          (cut == nullptr || f.begin_bit() < cut->begin_bit())) {
        cut = &f;
      }
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "CMA header truncated: %d of %d bytes; %s (bytes %d..%d) is incomplete",
        private_data.size(), cma::kHeaderBytes, cut->name, cut->byte, cut->end_byte() - 1));
  }
  const FieldView v = FieldView::Unchecked(private_data.data());
  const uint64_t version = v.Get(cma::kVersion);
  if (version != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CMA header: CMAVersion = 0x%02x; only version 0 is defined", version));
  }
  CmaHeader h;
  const uint64_t ipv = v.Get(cma::kIpVersion);
  if (ipv != 4 && ipv != 6) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CMA header: IPVersion = %d; expected 4 or 6", ipv));
  }
  h.ip_version = static_cast<uint8_t>(ipv);
  h.src_port = v.Get(cma::kSrcPort);
  const auto src = v.Bytes(cma::kSrcAddr);
  const auto dst = v.Bytes(cma::kDstAddr);
  std::copy(src.begin(), src.end(), h.src_addr.begin());
  std::copy(dst.begin(), dst.end(), h.dst_addr.begin());
  return h;
}

absl::Status CmaHeader::Emit(std::span<uint8_t> out) const {
  if (out.size() < cma::kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CMA header needs %d bytes; the buffer has %d", cma::kHeaderBytes, out.size()));
  }
  if (ip_version != 4 && ip_version != 6) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CMA header: IPVersion = %d; expected 4 or 6", ip_version));
  }
  FieldWriter w("CMA header", out.data());
  w.ZeroReserved<cma::kRows>();
  w.Set(cma::kVersion, 0);
  w.Set(cma::kIpVersion, ip_version);
  w.Set(cma::kSrcPort, src_port);
  w.SetBytes(cma::kSrcAddr, src_addr, "source address");
  w.SetBytes(cma::kDstAddr, dst_addr, "destination address");
  return w.status();
}

absl::StatusOr<PrivateData> CmaPrivateData(const char* what, size_t capacity,
                                           const CmaHeader& header,
                                           std::span<const uint8_t> user) {
  const size_t room = capacity > cma::kHeaderBytes ? capacity - cma::kHeaderBytes : 0;
  if (user.size() > room) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s user private data is %d bytes; with the %d-byte CMA header %s carries at most %d",
        what, user.size(), cma::kHeaderBytes, what, room));
  }
  std::array<uint8_t, PrivateData::kMaxBytes> buf{};
  if (absl::Status s = header.Emit(buf); !s.ok()) return s;
  std::copy(user.begin(), user.end(), buf.begin() + cma::kHeaderBytes);
  return PrivateData(std::span<const uint8_t>(buf.data(), cma::kHeaderBytes + user.size()));
}

std::span<const uint8_t> CmaUserData(std::span<const uint8_t> private_data) {
  if (private_data.size() <= cma::kHeaderBytes) return {};
  return private_data.subspan(cma::kHeaderBytes);
}

}  // namespace uscm::mad::wire
