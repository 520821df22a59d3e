// The kernel's device events. See uevents.h.
#include "api/librdmacm/uevents.h"

#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace uscm::librdmacm {

int OpenUeventSocket() {
  const int fd =
      socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
  if (fd < 0) return -1;
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  local.nl_groups = 1;  // the kernel's uevents
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

VerbsUevent ParseVerbsUevent(const char* msg, size_t len, std::string* devpath) {
  // The fields: NUL-terminated strings; the last one must end in the message.
  std::string_view rest(msg, len);
  if (rest.empty() || rest.back() != '\0') return VerbsUevent::kOther;
  auto next = [&rest]() {
    const size_t end = rest.find('\0');
    std::string_view field = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    return field;
  };
  const std::string_view header = next();
  const VerbsUevent kind = header.starts_with("add@")      ? VerbsUevent::kAdded
                           : header.starts_with("remove@") ? VerbsUevent::kRemoved
                                                           : VerbsUevent::kOther;
  if (kind == VerbsUevent::kOther) return kind;
  const std::string_view action = kind == VerbsUevent::kAdded ? "ACTION=add" : "ACTION=remove";
  bool verbs = false;
  std::string_view path;
  bool acted = false;
  while (!rest.empty()) {
    const std::string_view field = next();
    if (field == action) acted = true;
    if (field == "SUBSYSTEM=infiniband_verbs") verbs = true;
    if (field.starts_with("DEVPATH=")) path = field.substr(8);
  }
  if (!acted || !verbs || path.empty()) return VerbsUevent::kOther;
  if (devpath != nullptr) *devpath = std::string(path);
  return kind;
}


}  // namespace uscm::librdmacm
