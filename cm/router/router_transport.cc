#include "cm/router/router_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace uscm::router {
namespace {

// Waits for `fd` to be readable until `deadline` (CLOCK_MONOTONIC).
bool WaitReadable(int fd, mad::TimePoint deadline) {
  mad::RealClock clock;
  for (;;) {
    const mad::Duration left = deadline - clock.Now();
    if (left <= mad::Duration::Zero()) return false;
    pollfd p{fd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.nanos() / 1000000 + 1,
                                                                 INT32_MAX)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

RouterTransport::RouterTransport(int fd, std::string path, Welcome welcome)
    : fd_(fd), path_(std::move(path)), welcome_(std::move(welcome)), buf_(kMaxFrameBytes) {
  caps_.name = "router";
  caps_.kernel_rmpp = welcome_.kernel_rmpp;
  caps_.max_receive_size = welcome_.max_receive_size;
  caps_.comm_id_prefix_bits = welcome_.comm_id_prefix_bits;
  caps_.comm_id_prefix = welcome_.comm_id_prefix;
}

RouterTransport::~RouterTransport() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<RouterTransport>> RouterTransport::Connect(
    const std::string& socket_path, mad::Duration timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("router socket path \"", socket_path,
                                                   "\" is ", socket_path.size(),
                                                   " bytes; it must be 1..",
                                                   sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  auto fail = [&](absl::Status s) {
    close(fd);
    return s;
  };
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return fail(absl::UnavailableError(absl::StrCat("no uscmd router at ", socket_path, ": ",
                                                    std::strerror(errno))));
  }
  const auto hello = EncodeHello(Hello{static_cast<uint32_t>(getpid())});
  if (send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) < 0) {
    return fail(absl::UnavailableError(
        absl::StrCat("router at ", socket_path, ": hello: ", std::strerror(errno))));
  }
  if (!WaitReadable(fd, mad::RealClock().Now() + timeout)) {
    return fail(absl::DeadlineExceededError(absl::StrCat(
        "router at ", socket_path, " did not answer the hello within ", timeout.ToString())));
  }
  std::vector<uint8_t> buf(kMaxFrameBytes);
  const ssize_t got = recv(fd, buf.data(), buf.size(), 0);
  if (got <= 0) {
    return fail(absl::UnavailableError(
        absl::StrCat("router at ", socket_path, " closed the connection during the hello")));
  }
  std::span<const uint8_t> frame(buf.data(), static_cast<size_t>(got));
  if (absl::optional<uint8_t> theirs = OtherReleaseVersion(frame)) {
    return fail(OtherReleaseError(*theirs, kFrameVersion, socket_path));
  }
  if (auto refused = DecodeRefused(frame); refused.ok()) return fail(refused->why);
  auto wl = DecodeWelcome(frame);
  if (!wl.ok()) return fail(wl.status());
  return std::unique_ptr<RouterTransport>(new RouterTransport(fd, socket_path, *std::move(wl)));
}

void RouterTransport::Break(absl::string_view why) {
  if (!status_.ok()) return;
  status_ = absl::UnavailableError(absl::StrCat(
      "uscmd router at ", path_, " ", why,
      "; its connections are gone: connect again (a new RouterTransport and Device)"));
  // Keep the fd number (the caller's epoll set may hold it) but make it an
  // fd that never becomes readable, so an EOF does not wake the loop forever.
  const int quiet = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (quiet >= 0) {
    dup2(quiet, fd_);
    close(quiet);
  }
}

absl::Status RouterTransport::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  if (!status_.ok()) return status_;
  if (mad.size() < 24 || mad.size() > kMaxFrameBytes - kFrameHeaderBytes - kAddressBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("router: a MAD of ", mad.size(), " bytes; 24..",
                     kMaxFrameBytes - kFrameHeaderBytes - kAddressBytes, " can be sent"));
  }
  EncodeMad(to, mad, &out_);
  for (;;) {
    if (send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL) >= 0) break;
    if (errno == EINTR) continue;
    Break(absl::StrCat("failed: ", std::strerror(errno)));
    return status_;
  }
  ++counters_.sent;
  return absl::OkStatus();
}

void RouterTransport::Handle(std::span<const uint8_t> frame,
                             absl::FunctionRef<void(const mad::ReceivedMad&)>* sink,
                             int page_fd) {
  struct CloseFd {
    int fd;
    ~CloseFd() {
      if (fd >= 0) close(fd);
    }
  } close_fd{page_fd};
  auto type = PeekFrame(frame);
  if (!type.ok()) return;
  switch (*type) {
    case FrameType::kMad: {
      auto m = DecodeMad(frame);
      if (!m.ok()) return;
      ++counters_.received;
      if (sink != nullptr) {
        (*sink)(mad::ReceivedMad{m->address, m->mad});
      } else {
        held_.emplace_back(m->address, std::vector<uint8_t>(m->mad.begin(), m->mad.end()));
      }
      return;
    }
    case FrameType::kRefused: {
      auto why = DecodeRefused(frame);
      if (!why.ok()) return;
      ++counters_.refused;
      last_refusal_ = why->why;
      return;
    }
    case FrameType::kReply: {
      auto r = DecodeReply(frame);
      if (!r.ok()) return;
      if (auto it = std::find(unawaited_.begin(), unawaited_.end(), r->request);
          it != unawaited_.end()) {
        unawaited_.erase(it);  // a release nobody waits for
        ++counters_.unawaited_answers;
        return;
      }
      replies_.push_back(*r);
      return;
    }
    case FrameType::kLeaseReply: {
      auto r = DecodeLeaseReply(frame);
      if (!r.ok()) return;
      std::shared_ptr<mad::PortPage> page;
      if (r->status.ok() && page_fd >= 0) {
        auto mapped = mad::PortPage::Map(page_fd, r->ports);
        if (mapped.ok()) page = *std::move(mapped);
      }
      absl::StatusOr<mad::PortLease> lease = LeaseOf(*r, std::move(page));
      replies_.push_back(ReplyFrame{r->request, lease.status()});
      if (lease.ok()) leases_.emplace_back(r->request, *std::move(lease));
      return;
    }
    default:
      return;
  }
}

absl::StatusOr<mad::PortLease> RouterTransport::LeasePorts(uint16_t port_space) {
  if (!status_.ok()) return status_;
  const uint32_t request = next_request_++;
  const auto f = EncodeLease(LeaseFrame{request, port_space});
  if (send(fd_, f.data(), f.size(), MSG_NOSIGNAL) < 0) {
    Break(absl::StrCat("failed: ", std::strerror(errno)));
    return status_;
  }
  if (absl::Status s = AwaitReply(request, "the lease of a port block"); !s.ok()) return s;
  for (auto it = leases_.begin(); it != leases_.end(); ++it) {
    if (it->first != request) continue;
    mad::PortLease lease = std::move(it->second);
    leases_.erase(it);
    return lease;
  }
  return absl::InternalError("uscmd router: a lease reply without its lease");
}

// Frames come in batches (FrameBatch: one recvmmsg); a batch that came back
// short means the socket was empty, a full one may have left more, so the
// loop asks again.
size_t RouterTransport::Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
                              size_t max) {
  size_t n = 0;
  while (n < max && !held_.empty()) {
    auto [from, bytes] = std::move(held_.front());
    held_.pop_front();
    sink(mad::ReceivedMad{from, bytes});
    ++n;
  }
  for (;;) {
    if (n >= max || !status_.ok()) break;
    // At most one frame per MAD still wanted (a frame holds one MAD or none).
    const size_t want = std::min(FrameBatch::kSlots, max - n);
    ++counters_.receive_calls;
    const int got = batch_.Receive(fd_, want);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (got < 0) {
      Break(std::strerror(errno));
      break;
    }
    for (int i = 0; i < got; ++i) {
      if (batch_.frame(i).empty()) {  // the router closed the socket after these
        Break("closed the connection");
        break;
      }
      const uint64_t before = counters_.received;
      Handle(batch_.frame(i), &sink);
      n += counters_.received - before;
    }
    if (static_cast<size_t>(got) < want) break;  // the socket is empty
  }
  return n;
}

absl::Status RouterTransport::ClaimService(uint64_t service_id, uint64_t mask, bool reuse,
                                           const mad::ListenAddress& address,
                                           mad::ClaimKind kind) {
  if (!status_.ok()) return status_;
  const uint32_t request = next_request_++;
  const auto f = EncodeClaim(FrameType::kClaim,
                             ClaimFrame{request, service_id, mask, reuse, address, kind});
  if (send(fd_, f.data(), f.size(), MSG_NOSIGNAL) < 0) {
    Break(absl::StrCat("failed: ", std::strerror(errno)));
    return status_;
  }
  return AwaitReply(request, absl::StrCat(kind == mad::ClaimKind::kBind ? "the bind" : "the listen",
                                          " on service ID 0x", absl::Hex(service_id)));
}

// A kRelease frame on its way: its request number, or none when the router
// is gone (now or before).
absl::optional<uint32_t> RouterTransport::SendRelease(uint64_t service_id, uint64_t mask,
                                                      const mad::ListenAddress& address,
                                                      mad::ClaimKind kind) {
  if (!status_.ok()) return absl::nullopt;
  const uint32_t request = next_request_++;
  const auto f = EncodeClaim(FrameType::kRelease,
                             ClaimFrame{request, service_id, mask, false, address, kind});
  if (send(fd_, f.data(), f.size(), MSG_NOSIGNAL) < 0) {
    Break(absl::StrCat("failed: ", std::strerror(errno)));
    return absl::nullopt;
  }
  return request;
}

// Waits for the release's reply too: once the id is destroyed the service is
// free for the other processes (the kernel's rdma_destroy_id is as
// synchronous); without the wait another process's listen could reach the
// router before this release, on its own socket, and find the service taken.
void RouterTransport::ReleaseService(uint64_t service_id, uint64_t mask,
                                     const mad::ListenAddress& address, mad::ClaimKind kind) {
  if (auto request = SendRelease(service_id, mask, address, kind)) {
    (void)AwaitReply(*request,
                     absl::StrCat("the release of service ID 0x", absl::Hex(service_id)));
  }
}

void RouterTransport::ReleaseServiceNoWait(uint64_t service_id, uint64_t mask,
                                           const mad::ListenAddress& address,
                                           mad::ClaimKind kind) {
  if (auto request = SendRelease(service_id, mask, address, kind)) unawaited_.push_back(*request);
}

absl::Status RouterTransport::AwaitReply(uint32_t request, const std::string& what) {
  const mad::TimePoint deadline = mad::RealClock().Now() + mad::Duration::Seconds(30);
  for (;;) {
    for (auto it = replies_.begin(); it != replies_.end(); ++it) {
      if (it->request == request) {
        absl::Status s = it->status;
        replies_.erase(it);
        return s;
      }
    }
    if (!WaitReadable(fd_, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("uscmd router at ", path_, " did not answer ", what, " within 30s"));
    }
    // recvmsg: a lease reply brings its page's fd (SCM_RIGHTS).
    iovec iov{buf_.data(), buf_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got <= 0) {
      Break(got == 0 ? "closed the connection" : std::strerror(errno));
      return status_;
    }
    int page_fd = -1;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t fds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < fds; ++i) {
        int got_fd = -1;
        std::memcpy(&got_fd, CMSG_DATA(cm) + i * sizeof(int), sizeof got_fd);
        if (page_fd < 0) {
          page_fd = got_fd;
        } else {
          close(got_fd);
        }
      }
    }
    Handle(std::span<const uint8_t>(buf_.data(), static_cast<size_t>(got)), nullptr, page_fd);
  }
}

std::string DefaultRouterSocket(const std::string& ca_name, int port_num) {
  return absl::StrCat("/tmp/uscmd-", ca_name, "-", port_num, ".sock");
}

absl::StatusOr<std::unique_ptr<mad::Transport>> OpenOwnerOrRouter(
    const std::function<absl::StatusOr<std::unique_ptr<mad::Transport>>()>& open_owner,
    const std::string& socket_path) {
  // A router serves the port (or systemd holds its activation socket): use
  // it even when the port is free, so that every process of the host goes
  // through it and it can clean up for a killed one.
  struct stat st {};
  if (stat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    auto first = RouterTransport::Connect(socket_path);
    if (first.ok()) return std::unique_ptr<mad::Transport>(std::move(*first));
  }
  auto owner = open_owner();
  if (owner.ok() || owner.status().code() != absl::StatusCode::kFailedPrecondition) {
    return owner;
  }
  auto routed = RouterTransport::Connect(socket_path);
  if (!routed.ok()) {
    return absl::UnavailableError(absl::StrCat(owner.status().message(),
                                               "; and the router fallback failed: ",
                                               routed.status().message()));
  }
  return std::unique_ptr<mad::Transport>(std::move(*routed));
}

}  // namespace uscm::router
