#include "verbs/roce_addressing.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace uscm::verbs {

mad::Gid Ipv4MappedGid(uint32_t ipv4) {
  mad::Gid g;
  g.raw[10] = 0xFF;
  g.raw[11] = 0xFF;
  for (int i = 0; i < 4; ++i) g.raw[12 + i] = static_cast<uint8_t>(ipv4 >> (24 - 8 * i));
  return g;
}

bool IsIpv4Mapped(const mad::Gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xFF && gid.raw[11] == 0xFF;
}

absl::StatusOr<std::vector<mad::Gid>> ReadGidTable(const std::string& device, int port,
                                                   const std::string& sysfs) {
  const std::string dir =
      absl::StrCat(sysfs, "/class/infiniband/", device, "/ports/", port, "/gids/");
  std::vector<mad::Gid> table;
  for (int i = 0; i < 256; ++i) {
    std::ifstream f(absl::StrCat(dir, i));
    if (!f) break;
    std::string text;
    std::getline(f, text);
    absl::StatusOr<mad::Gid> g = mad::Gid::Parse(text);
    if (!g.ok()) {
      return absl::DataLossError(
          absl::StrCat(dir, i, ": \"", text, "\" is not a GID: ", g.status().message()));
    }
    table.push_back(*g);
  }
  if (table.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no GID table at ", dir, ": no RDMA device ", device, " port ", port,
        " (Soft-RoCE: modprobe rdma_rxe && rdma link add ", device, " type rxe netdev <if>)"));
  }
  return table;
}

absl::StatusOr<uint8_t> GidIndex(const std::vector<mad::Gid>& table, const mad::Gid& gid) {
  std::vector<std::string> present;
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] == gid) return static_cast<uint8_t>(i);
    if (!table[i].is_zero()) present.push_back(absl::StrCat(i, "=", table[i].ToString()));
  }
  return absl::NotFoundError(absl::StrCat("GID ", gid.ToString(),
                                          " is not in the port's GID table (",
                                          absl::StrJoin(present, ", "),
                                          "); is the IP address on the RDMA netdev?"));
}

cm::PathInfo RocePathFromIps(uint32_t local_ipv4, uint32_t remote_ipv4) {
  cm::PathInfo p;
  p.local_lid = mad::kPermissiveLid;
  p.remote_lid = mad::kPermissiveLid;
  p.local_gid = Ipv4MappedGid(local_ipv4);
  p.remote_gid = Ipv4MappedGid(remote_ipv4);
  p.hop_limit = 64;
  p.subnet_local = true;  // the GRH comes from the Ethernet link layer
  p.local_ack_timeout = 19;
  p.packet_life_time = 18;
  return p;
}

void RoceAddressing::RedirectQp1(const mad::Gid& gid, uint32_t qpn, uint32_t qkey) {
  redirects_[gid] = Target{qpn, qkey};
}

void RoceAddressing::SetGids(std::vector<mad::Gid> gids) {
  std::lock_guard<std::mutex> lock(mu_);
  gids_ = std::move(gids);
}

mad::MadAddress RoceAddressing::Rewrite(const mad::MadAddress& to) {
  mad::MadAddress a = to;
  if (a.has_grh) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool want_v4 = IsIpv4Mapped(a.gid);
    const bool have_ok = a.sgid_index < gids_.size() && !gids_[a.sgid_index].is_zero() &&
                         IsIpv4Mapped(gids_[a.sgid_index]) == want_v4;
    if (!have_ok) {
      bool found = false;
      for (size_t i = 0; i < gids_.size() && !found; ++i) {
        if (!gids_[i].is_zero() && IsIpv4Mapped(gids_[i]) == want_v4) {
          a.sgid_index = static_cast<uint8_t>(i);
          found = true;
        }
      }
      if (found) {
        ++counters_.sgid_fixed;
      } else {
        ++counters_.no_sgid;
      }
    }
  }
  if (a.qpn == mad::kQp1) {
    auto it = redirects_.find(a.gid);
    if (it != redirects_.end()) {
      a.qpn = it->second.qpn;
      a.qkey = it->second.qkey;
      ++counters_.redirected;
    }
  }
  return a;
}

absl::Status RoceAddressing::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  return inner_.Send(Rewrite(to), mad);
}

}  // namespace uscm::verbs
