#include "api/rdma_cm/roce_multicast.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace uscm::cm {

absl::StatusOr<mad::Gid> RoceMgid(bool ipv4, const std::array<uint8_t, 16>& ip, bool roce_v2) {
  mad::Gid g;
  const bool zero = ipv4 ? (ip[12] | ip[13] | ip[14] | ip[15]) == 0
                         : std::all_of(ip.begin(), ip.end(), [](uint8_t b) { return b == 0; });
  if (zero) {
    return absl::InvalidArgumentError(
        "join_multicast: the group is the zero address (the kernel's rdma_cm refuses it: EINVAL)");
  }
  if (!ipv4) {
    if (roce_v2) {
      return absl::UnimplementedError(
          "join_multicast: IPv6 groups on a RoCE v2 port are not supported (as the kernel's "
          "rdma_cm: errno ENOTSUPP 524)");
    }
    g.raw = ip;
    return g;
  }
  if (!roce_v2) {  // RoCE v1: ff0e::ffff:a.b.c.d
    g.raw[0] = 0xFF;
    g.raw[1] = 0x0E;
  }
  g.raw[10] = g.raw[11] = 0xFF;
  for (int i = 12; i < 16; ++i) g.raw[i] = ip[i];
  return g;
}

namespace {
class SocketMembership final : public IpMembership {
 public:
  explicit SocketMembership(int fd) : fd_(fd) {}
  ~SocketMembership() override { close(fd_); }

 private:
  int fd_;
};
}  // namespace

absl::StatusOr<std::unique_ptr<IpMembership>> NetdevIpMulticast::Join(
    bool ipv4, const std::array<uint8_t, 16>& group, const std::array<uint8_t, 16>& local) {
  const int fd = socket(ipv4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("join_multicast: socket for the IP membership: ", strerror(errno)));
  }
  int rc;
  if (ipv4) {
    ip_mreqn m = {};
    memcpy(&m.imr_multiaddr, &group[12], 4);
    memcpy(&m.imr_address, &local[12], 4);  // the interface that holds the id's address
    rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
  } else {
    ipv6_mreq m = {};
    memcpy(&m.ipv6mr_multiaddr, group.data(), 16);
    rc = setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &m, sizeof(m));
  }
  if (rc != 0) {
    const int err = errno;
    close(fd);
    char g[INET6_ADDRSTRLEN] = "?";
    inet_ntop(ipv4 ? AF_INET : AF_INET6, ipv4 ? &group[12] : group.data(), g, sizeof(g));
    return absl::UnavailableError(absl::StrCat("join_multicast: cannot join IP group ", g,
                                               " on the port's netdev: ", strerror(err)));
  }
  return std::unique_ptr<IpMembership>(new SocketMembership(fd));
}

}  // namespace uscm::cm
