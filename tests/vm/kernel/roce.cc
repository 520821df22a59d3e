#include "tests/vm/kernel/roce.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace uscm::vmtest {

mad::Gid Ipv4MappedGid(uint32_t ip) {
  mad::Gid g;
  g.raw[10] = 0xFF;
  g.raw[11] = 0xFF;
  g.raw[12] = static_cast<uint8_t>(ip >> 24);
  g.raw[13] = static_cast<uint8_t>(ip >> 16);
  g.raw[14] = static_cast<uint8_t>(ip >> 8);
  g.raw[15] = static_cast<uint8_t>(ip);
  return g;
}

bool IsIpv4Mapped(const mad::Gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xFF && gid.raw[11] == 0xFF;
}

absl::StatusOr<uint8_t> FindGidIndex(const std::string& ca_name, int port_num,
                                     const mad::Gid& gid) {
  const std::string dir =
      absl::StrCat("/sys/class/infiniband/", ca_name, "/ports/", port_num, "/gids/");
  for (int i = 0; i < 256; ++i) {
    std::ifstream in(absl::StrCat(dir, i));
    if (!in) break;
    std::string text;
    std::getline(in, text);
    absl::StatusOr<mad::Gid> g = mad::Gid::Parse(text);
    if (g.ok() && *g == gid) return static_cast<uint8_t>(i);
  }
  return absl::NotFoundError(absl::StrCat("GID ", gid.ToString(), " is not in the GID table of ",
                                          ca_name, " port ", port_num, " (", dir,
                                          "N); is the IP address on the RoCE netdev?"));
}

RoceIpv4Transport::RoceIpv4Transport(mad::Transport& inner, const mad::Gid& gid,
                                     uint8_t gid_index)
    : inner_(inner), gid_index_(gid_index), port_(inner.port()) {
  port_.gid = gid;
}

absl::Status RoceIpv4Transport::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  if (!to.has_grh || !IsIpv4Mapped(to.gid)) {
    ++counters_.sent_other;
    return inner_.Send(to, mad);
  }
  mad::MadAddress a = to;
  a.sgid_index = gid_index_;
  ++counters_.sent_from_ipv4_gid;
  return inner_.Send(a, mad);
}

}  // namespace uscm::vmtest
