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

bool IsVerbsDeviceAdded(const char* msg, size_t len, std::string* devpath) {
  // The fields: NUL-terminated strings; the last one must end in the message.
  std::string_view rest(msg, len);
  if (rest.empty() || rest.back() != '\0') return false;
  auto next = [&rest]() {
    const size_t end = rest.find('\0');
    std::string_view field = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    return field;
  };
  if (!next().starts_with("add@")) return false;
  bool verbs = false;
  std::string_view path;
  bool added = false;
  while (!rest.empty()) {
    const std::string_view field = next();
    if (field == "ACTION=add") added = true;
    if (field == "SUBSYSTEM=infiniband_verbs") verbs = true;
    if (field.starts_with("DEVPATH=")) path = field.substr(8);
  }
  if (!added || !verbs || path.empty()) return false;
  if (devpath != nullptr) *devpath = std::string(path);
  return true;
}

}  // namespace uscm::librdmacm
