#include "verbs/ipoib.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace uscm::verbs {

absl::optional<mad::Gid> GidOfIpoibHwAddr(absl::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::vector<absl::string_view> bytes = absl::StrSplit(text, ':');
  if (bytes.size() != 20) return absl::nullopt;
  mad::Gid gid;
  for (size_t i = 0; i < bytes.size(); ++i) {
    uint32_t b = 0;
    if (bytes[i].size() != 2 || !absl::SimpleHexAtoi(bytes[i], &b)) return absl::nullopt;
    if (i >= 4) gid.raw[i - 4] = static_cast<uint8_t>(b);
  }
  return gid;
}

absl::optional<mad::Gid> GidOfIpoibLladdr(std::span<const uint8_t> lladdr) {
  if (lladdr.size() != 20) return absl::nullopt;
  mad::Gid gid;
  std::copy(lladdr.begin() + 4, lladdr.end(), gid.raw.begin());
  return gid;
}

std::vector<std::string> IpoibInterfacesOf(const mad::Gid& port_gid, const std::string& sysfs) {
  std::vector<std::string> out;
  const std::string dir = sysfs + "/class/net";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::ifstream f(dir + "/" + name + "/address");
    std::stringstream text;
    text << f.rdbuf();
    absl::optional<mad::Gid> g = GidOfIpoibHwAddr(text.str());
    if (g.has_value() && *g == port_gid) out.push_back(name);
  }
  closedir(d);
  return out;
}

std::vector<InterfaceAddress> IpoibAddressesOf(const mad::Gid& port_gid, const std::string& sysfs,
                                               std::vector<InterfaceAddress> (*addresses)()) {
  const std::vector<std::string> names = IpoibInterfacesOf(port_gid, sysfs);
  if (names.empty()) return {};
  std::vector<InterfaceAddress> out = addresses();
  std::erase_if(out, [&](const InterfaceAddress& a) {
    return std::find(names.begin(), names.end(), a.interface) == names.end();
  });
  return out;
}

namespace {

// One line of a sysfs file, trailing newline and blanks dropped ("" when absent).
std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

bool ParseHex(absl::string_view text, uint32_t* out) {
  if (absl::StartsWith(text, "0x")) text.remove_prefix(2);
  return !text.empty() && absl::SimpleHexAtoi(text, out);
}

}  // namespace

std::vector<IpoibNetdev> IpoibNetdevsOf(const mad::Gid& port_gid, const std::string& sysfs) {
  std::vector<IpoibNetdev> out;
  for (const std::string& name : IpoibInterfacesOf(port_gid, sysfs)) {
    const std::string dir = sysfs + "/class/net/" + name + "/";
    IpoibNetdev n;
    n.name = name;
    uint32_t pkey = 0, flags = 0;
    if (!absl::SimpleAtoi(ReadLine(dir + "ifindex"), &n.ifindex) || n.ifindex <= 0 ||
        !ParseHex(ReadLine(dir + "pkey"), &pkey) || pkey > 0xffff ||
        !ParseHex(ReadLine(dir + "flags"), &flags)) {
      continue;
    }
    n.pkey = static_cast<uint16_t>(pkey);
    n.up = (flags & 0x1) != 0;  // IFF_UP
    out.push_back(std::move(n));
  }
  return out;
}

const std::vector<IpoibNetdev>& IpoibNetdevCache::Of(const mad::Gid& port_gid,
                                                     uint64_t generation) {
  if (!kept_ || generation != generation_ || !(port_gid == gid_)) {
    netdevs_ = IpoibNetdevsOf(port_gid, sysfs_);
    ++reads_;
    kept_ = true;
    generation_ = generation;
    gid_ = port_gid;
  }
  return netdevs_;
}

const IpoibNetdev* IpoibNetdevOfRequest(const std::vector<IpoibNetdev>& netdevs, uint16_t pkey,
                                        bool ipv6, const std::array<uint8_t, 16>& local,
                                        std::vector<InterfaceAddress> (*addresses)()) {
  std::vector<const IpoibNetdev*> l2;
  for (const IpoibNetdev& n : netdevs) {
    if ((n.pkey & 0x7fff) == (pkey & 0x7fff)) l2.push_back(&n);
  }
  if (l2.size() <= 1) return l2.empty() ? nullptr : l2.front();
  const std::vector<InterfaceAddress> held = addresses();
  for (const IpoibNetdev* n : l2) {
    for (const InterfaceAddress& a : held) {
      if (a.interface == n->name && a.ipv6 == ipv6 && a.ip == local) return n;
    }
  }
  return nullptr;
}

}  // namespace uscm::verbs
