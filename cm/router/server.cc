#include "cm/router/server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace uscm::router {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// CAP_NET_BIND_SERVICE (bit 10) in the effective set of `pid`, from
// /proc/<pid>/status (read at accept, while the peer holds the connection).
bool HasNetBindService(pid_t pid) {
  std::FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/status").c_str(), "r");
  if (f == nullptr) return false;
  char line[256];
  uint64_t caps = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "CapEff: %" SCNx64, &caps) == 1) {
      found = true;
      break;
    }
  }
  std::fclose(f);
  constexpr int kCapNetBindService = 10;
  return found && (caps >> kCapNetBindService & 1) != 0;
}

}  // namespace

bool RouterServesAt(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return live;
}

absl::StatusOr<int> ActivatedListenFd(const char* listen_pid, const char* listen_fds,
                                      pid_t self) {
  if (listen_pid == nullptr || listen_fds == nullptr) return -1;
  int64_t pid = 0, fds = 0;
  if (!absl::SimpleAtoi(listen_pid, &pid) || !absl::SimpleAtoi(listen_fds, &fds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket activation: LISTEN_PID=\"", listen_pid, "\" LISTEN_FDS=\"", listen_fds,
        "\" are not numbers"));
  }
  if (pid != self) return -1;  // meant for another process (inherited from a parent)
  if (fds != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket activation passed ", fds,
        " sockets; uscmd serves one port and takes exactly one (one ListenSequentialPacket=)"));
  }
  constexpr int kSdListenFdsStart = 3;  // sd_listen_fds(3)
  return kSdListenFdsStart;
}

Server::Server(mad::Transport& wire, ServerOptions options)
    : wire_(wire), options_(std::move(options)) {
  router_ = std::make_unique<Router>(
      wire_, options_.router,
      [this](uint8_t slot, std::span<const uint8_t> frame) { SendTo(slot, frame); });
  router_->set_lease_hooks(LeaseHooks{
      [](size_t ports) { return mad::PortPage::CreateShared(ports); },
      [this](uint8_t slot, std::span<const uint8_t> frame,
             const std::shared_ptr<mad::PortPage>& page) { SendTo(slot, frame, page); }});
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(mad::Transport& wire,
                                                       ServerOptions options) {
  std::unique_ptr<Server> s(new Server(wire, std::move(options)));
  if (absl::Status st = s->Init(); !st.ok()) return st;
  return s;
}

absl::Status Server::Init() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options_.socket_path.empty() || options_.socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router socket path \"", options_.socket_path, "\" is ",
        options_.socket_path.size(), " bytes; it must be 1..", sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, options_.socket_path.data(), options_.socket_path.size());
  if (options_.listen_fd >= 0) {
    // Socket activation: systemd bound it, set its mode and owns the file.
    owns_socket_file_ = false;
    listen_fd_ = options_.listen_fd;
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(listen_fd_, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the activated socket (fd ", listen_fd_,
          ") is not a SOCK_SEQPACKET socket; use ListenSequentialPacket= in the .socket unit"));
    }
    const int flags = fcntl(listen_fd_, F_GETFL);
    if (flags < 0 || fcntl(listen_fd_, F_SETFL, flags | O_NONBLOCK) != 0) return Errno("fcntl");
    fcntl(listen_fd_, F_SETFD, FD_CLOEXEC);
    return WatchFds();
  }
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Errno("socket(AF_UNIX, SOCK_SEQPACKET)");
  if (RouterServesAt(options_.socket_path)) {
    const int fd = listen_fd_;
    listen_fd_ = -1;  // not ours: the destructor must not unlink it
    close(fd);
    return absl::AlreadyExistsError(absl::StrCat(
        "another uscmd is serving ", options_.socket_path,
        "; stop it first, or give this one another --socket"));
  }
  unlink(options_.socket_path.c_str());  // a stale socket of a dead router
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Errno(absl::StrCat("bind(", options_.socket_path, ")"));
  }
  if (chmod(options_.socket_path.c_str(), options_.socket_mode) != 0) {
    return Errno(absl::StrCat("chmod(", options_.socket_path, ")"));
  }
  if (listen(listen_fd_, 128) != 0) return Errno("listen");
  return WatchFds();
}

absl::Status Server::WatchFds() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || stop_fd_ < 0) return Errno("epoll_create1 / eventfd");
  for (int fd : {listen_fd_, stop_fd_, wire_.fd()}) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      // EBADF / EPERM on the wire's fd: not a real descriptor (umad2sim's
      // fake fd under ibsim); the loop drains the wire on a short tick.
      if (fd == wire_.fd() && (errno == EBADF || errno == EPERM)) {
        wire_fd_watched_ = false;
        continue;
      }
      return Errno(absl::StrCat("epoll_ctl(", fd, ")"));
    }
  }
  return absl::OkStatus();
}

Server::~Server() {
  for (auto& [fd, c] : conns_) close(fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    if (owns_socket_file_) unlink(options_.socket_path.c_str());
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void Server::Stop() {
  stop_ = true;
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof one);
}

absl::Status Server::Run() {
  const mad::RealClock clock;
  while (!stop_) {
    if (IdleExpired(clock.Now())) {
      idle_exited_ = true;
      break;
    }
    mad::Duration wait = mad::Duration::Seconds(1);
    if (idle_since_.has_value()) {
      wait = std::min(wait, *idle_since_ + options_.idle_exit - clock.Now());
    }
    auto n = RunOnce(std::max(wait, mad::Duration::Zero()));
    if (!n.ok()) return n.status();
    if (!wire_lost().ok()) break;
  }
  return absl::OkStatus();
}

bool Server::IdleExpired(mad::TimePoint now) {
  if (options_.idle_exit <= mad::Duration::Zero()) return false;
  if (!conns_.empty()) {
    idle_since_.reset();
    return false;
  }
  if (!idle_since_.has_value()) idle_since_ = now;
  return now - *idle_since_ >= options_.idle_exit;
}

absl::StatusOr<int> Server::RunOnce(mad::Duration timeout) {
  if (options_.pump) timeout = std::min(timeout, options_.pump());
  if (!wire_fd_watched_) timeout = std::min(timeout, kUnwatchedWireTick);
  const int ms = static_cast<int>(
      std::clamp<int64_t>((timeout.nanos() + 999999) / 1000000, 0, INT32_MAX));
  epoll_event evs[64];
  const int n = epoll_wait(epoll_fd_, evs, 64, ms);
  if (n < 0 && errno != EINTR) return Errno("epoll_wait");
  // The wire is read when it has something: epoll said so, or its fd is not
  // one epoll can watch (ibsim's), or a test's pump drives a simulated wire.
  // A wake for a client alone read the umad fd only to get EAGAIN.
  bool wire_ready = !wire_fd_watched_ || wire_.fd() < 0 || options_.pump != nullptr;
  for (int i = 0; i < n; ++i) {
    const int fd = evs[i].data.fd;
    if (fd == listen_fd_) {
      Accept();
    } else if (fd == stop_fd_) {
      uint64_t junk;
      (void)!read(stop_fd_, &junk, sizeof junk);
    } else if (fd == wire_.fd()) {
      wire_ready = true;  // drained below
    } else {
      if (evs[i].events & EPOLLOUT) Flush(fd);
      if (evs[i].events & ~EPOLLOUT) ReadClient(fd);
    }
  }
  if (options_.pump) options_.pump();
  if (wire_ready) {
    ++counters_.wire_polls;
    router_->PollWire();
  }
  return std::max(n, 0);
}

void Server::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options_.client_send_buffer,
               sizeof options_.client_send_buffer);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      continue;
    }
    Conn c;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      c.creds.uid = cred.uid;
      c.creds.pid = static_cast<uint32_t>(cred.pid);
      c.creds.may_bind_privileged_ports = HasNetBindService(cred.pid);
    } else {
      ++counters_.no_credentials;
      c.creds.uid = UINT32_MAX;
      c.creds.may_bind_privileged_ports = false;
    }
    conns_[fd] = c;
    ++counters_.accepted;
  }
}

// Frames come in batches (FrameBatch: one recvmmsg; a short batch means the
// socket is empty).
void Server::ReadClient(int fd) {
  if (conns_.find(fd) == conns_.end()) return;
  for (int taken = 0; taken < 64;) {  // bounded: other clients get a turn
    ++counters_.client_receive_calls;
    const int got = batch_.Receive(fd, FrameBatch::kSlots);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got < 0) {
      CloseClient(fd);
      return;
    }
    for (int i = 0; i < got; ++i) {
      if (batch_.frame(i).empty()) {  // the client closed its end after these
        CloseClient(fd);
        return;
      }
      if (!HandleClientFrame(fd, batch_.frame(i))) return;
    }
    taken += got;
    if (static_cast<size_t>(got) < FrameBatch::kSlots) return;  // the socket is empty
  }
}

// One frame of client `fd`: to the router once it has a slot, else its hello.
// False when the client was closed (refused).
bool Server::HandleClientFrame(int fd, std::span<const uint8_t> frame) {
  Conn& c = conns_[fd];
  if (c.slot != 0) {
    router_->HandleFrame(c.slot, frame);
    return true;
  }
  if (!DecodeHello(frame).ok()) {
    // A library of another release reads the version of this refusal (it
    // cannot decode the rest) and tells its user.
    absl::optional<uint8_t> theirs = OtherReleaseVersion(frame);
    ++(theirs ? counters_.other_release_hellos : counters_.bad_hello);
    auto f = EncodeRefused(theirs ? OtherReleaseError(kFrameVersion, *theirs, "")
                                  : absl::InvalidArgumentError(
                                        "router: the first frame of a connection must be a hello"));
    (void)!send(fd, f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    CloseClient(fd);
    return false;
  }
  auto wl = router_->AddClient(c.creds);
  if (!wl.ok()) {
    auto f = EncodeRefused(wl.status());
    (void)!send(fd, f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    CloseClient(fd);
    return false;
  }
  c.slot = wl->slot;
  by_slot_[wl->slot] = fd;
  auto f = EncodeWelcome(*wl);
  SendTo(wl->slot, f);
  return true;
}

void Server::CloseClient(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  const uint8_t slot = it->second.slot;
  conns_.erase(it);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  if (slot != 0) {
    by_slot_.erase(slot);
    router_->RemoveClient(slot);
  }
}

namespace {

bool IsMadFrame(std::span<const uint8_t> frame) {
  absl::StatusOr<FrameType> t = PeekFrame(frame);
  return t.ok() && *t == FrameType::kMad;
}

uint64_t HashOf(std::span<const uint8_t> frame) {
  return absl::HashOf(std::string_view(reinterpret_cast<const char*>(frame.data()), frame.size()));
}

// One frame; with a page, its memfd rides along (SCM_RIGHTS).
ssize_t SendFrame(int fd, std::span<const uint8_t> frame, const mad::PortPage* page) {
  if (page == nullptr) return send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  iovec iov{const_cast<uint8_t*>(frame.data()), frame.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  const int page_fd = page->fd();
  std::memcpy(CMSG_DATA(cm), &page_fd, sizeof page_fd);
  return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

// A full socket does not lose the frame: dropping it (as the router once did)
// turned a burst of 1,000 REQs for one slow process into a storm of CM
// retries (cmtime -c 1000: 715 frames lost, 13,780 MADs for 5,000).
void Server::SendTo(uint8_t slot, std::span<const uint8_t> frame,
                    const std::shared_ptr<mad::PortPage>& page) {
  auto it = by_slot_.find(slot);
  if (it == by_slot_.end()) return;
  const int fd = it->second;
  Conn& c = conns_[fd];
  if (c.queued.empty()) {
    if (SendFrame(fd, frame, page.get()) >= 0) return;
    // A dead socket is noticed by ReadClient; only a full one waits.
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) return;
  }
  if (c.queued.size() >= kMaxQueuedFrames) {
    ++counters_.dropped_to_client;
    return;
  }
  if (IsMadFrame(frame)) {
    uint32_t& copies = c.queued_mads[HashOf(frame)];
    // The hash only finds candidates; the bytes decide, so two different
    // MADs that share a hash are both queued.
    if (copies > 0 && std::any_of(c.queued.begin(), c.queued.end(), [&](const auto& q) {
          return std::equal(q.frame.begin(), q.frame.end(), frame.begin(), frame.end());
        })) {
      ++counters_.duplicates_not_queued;
      return;
    }
    ++copies;
  }
  c.queued.push_back(Conn::Outgoing{std::vector<uint8_t>(frame.begin(), frame.end()), page});
  ++counters_.queued_to_client;
  counters_.max_client_queue = std::max<uint64_t>(counters_.max_client_queue, c.queued.size());
  WatchWritable(fd, true);
}

void Server::Flush(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  while (!c.queued.empty()) {
    const std::vector<uint8_t>& f = c.queued.front().frame;
    if (SendFrame(fd, f, c.queued.front().page.get()) < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return;
      c.queued.clear();  // dead: ReadClient closes it
      c.queued_mads.clear();
      break;
    }
    if (IsMadFrame(f)) {  // it left the queue for the socket: a copy may wait again
      auto q = c.queued_mads.find(HashOf(f));
      if (q != c.queued_mads.end() && --q->second == 0) c.queued_mads.erase(q);
    }
    c.queued.pop_front();
  }
  WatchWritable(fd, false);
}

void Server::WatchWritable(int fd, bool on) {
  Conn& c = conns_[fd];
  if (c.watching_out == on) return;
  epoll_event ev{};
  ev.events = on ? EPOLLIN | EPOLLOUT : EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) == 0) c.watching_out = on;
}

}  // namespace uscm::router
