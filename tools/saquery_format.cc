#include "tools/saquery_format.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstdint>

#include "absl/strings/str_format.h"

namespace uscm::tools {
namespace {

// inet_ntop, as saquery formats GIDs.
std::string GidText(const mad::Gid& g) {
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, g.raw.data(), buf, sizeof(buf)) != nullptr ? buf : "?";
}

// The record byte holding a 2-bit selector above a 6-bit value.
unsigned SelectorByte(mad::wire::Selector selector, unsigned value) {
  return (static_cast<unsigned>(selector) << 6) | (value & 0x3F);
}

void Row(std::string& out, const char* name, const std::string& value) {
  std::string dots = name;
  dots.resize(24, '.');
  absl::StrAppend(&out, "\t\t", dots, value, "\n");
}

}  // namespace

std::string FormatPathRecord(const mad::wire::PathRecord& p) {
  std::string out = "PathRecord dump:\n";
  Row(out, "service_id", absl::StrFormat("0x%016x", p.service_id));
  Row(out, "dgid", GidText(p.dgid));
  Row(out, "sgid", GidText(p.sgid));
  Row(out, "dlid", absl::StrFormat("%u", p.dlid));
  Row(out, "slid", absl::StrFormat("%u", p.slid));
  const uint32_t hop_flow_raw =
      (p.raw_traffic ? 1u << 31 : 0) | (p.flow_label << 8) | p.hop_limit;
  Row(out, "hop_flow_raw", absl::StrFormat("0x%X", hop_flow_raw));
  Row(out, "tclass", absl::StrFormat("0x%X", p.tclass));
  Row(out, "num_path_revers", absl::StrFormat("0x%X", (p.reversible ? 0x80u : 0u) | p.numb_path));
  Row(out, "pkey", absl::StrFormat("0x%X", p.pkey));
  Row(out, "qos_class", absl::StrFormat("0x%X", p.qos_class));
  Row(out, "sl", absl::StrFormat("0x%X", p.sl));
  Row(out, "mtu", absl::StrFormat("0x%X", SelectorByte(p.mtu_selector, static_cast<unsigned>(p.mtu))));
  Row(out, "rate", absl::StrFormat("0x%X", SelectorByte(p.rate_selector, p.rate)));
  Row(out, "pkt_life", absl::StrFormat("0x%X", SelectorByte(p.packet_life_time_selector,
                                                            p.packet_life_time)));
  Row(out, "preference", absl::StrFormat("0x%X", p.preference));
  Row(out, "resv2", "0x000000000000");
  return out;
}

std::string FormatMcMemberRecord(const mad::wire::McMemberRecord& m) {
  std::string out = "MCMember Record dump:\n";
  Row(out, "MGID", GidText(m.mgid));
  Row(out, "PortGid", GidText(m.port_gid));
  Row(out, "qkey", absl::StrFormat("0x%x", m.qkey));
  Row(out, "mlid", absl::StrFormat("0x%x", m.mlid));
  Row(out, "mtu", absl::StrFormat("0x%x", SelectorByte(m.mtu_selector, static_cast<unsigned>(m.mtu))));
  Row(out, "TClass", absl::StrFormat("0x%x", m.tclass));
  Row(out, "pkey", absl::StrFormat("0x%x", m.pkey));
  Row(out, "rate", absl::StrFormat("0x%x", SelectorByte(m.rate_selector, m.rate)));
  Row(out, "pkt_life", absl::StrFormat("0x%x", SelectorByte(m.packet_life_time_selector,
                                                            m.packet_life_time)));
  Row(out, "SL", absl::StrFormat("0x%x", m.sl));
  Row(out, "FlowLabel", absl::StrFormat("0x%x", m.flow_label));
  Row(out, "HopLimit", absl::StrFormat("0x%x", m.hop_limit));
  Row(out, "Scope", absl::StrFormat("0x%x", static_cast<unsigned>(m.scope)));
  Row(out, "JoinState", absl::StrFormat("0x%x", m.join_state.bits()));
  Row(out, "ProxyJoin", absl::StrFormat("0x%x", m.proxy_join ? 1u : 0u));
  return out;
}

}  // namespace uscm::tools
