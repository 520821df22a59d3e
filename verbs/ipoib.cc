#include "verbs/ipoib.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
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

}  // namespace uscm::verbs
