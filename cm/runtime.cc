#include "cm/runtime.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "mad/agent_pump.h"
#include "mad/signal_free_threads.h"

namespace uscm::cm {

namespace {
constexpr uint8_t kCmClass = 0x07;

const mad::Clock& RealClockInstance() {
  static const mad::RealClock* clock = new mad::RealClock();
  return *clock;
}
}  // namespace

namespace {

// A router client's transport names the comm ID range this process must use.
CmConfig WithTransportCommIds(CmConfig config, const mad::TransportCaps& caps) {
  if (caps.comm_id_prefix_bits > 0) {
    config.comm_id_prefix_bits = caps.comm_id_prefix_bits;
    config.comm_id_prefix = caps.comm_id_prefix;
  }
  return config;
}

}  // namespace

Node::Node(mad::Transport& transport, const mad::Clock& clock, NodeOptions options)
    : transport_(transport),
      clock_(clock),
      cm_(transport.port(), WithTransportCommIds(options.cm, transport.caps()),
          options.seed.value_or(1)),
      agent_(mad::ConfigFor(transport, options.agent), clock.Now()),
      cache_(options.path_cache_capacity),
      sa_(&agent_, sa::SaClientConfig{sa::SaAddressFor(transport.port()), &cache_}),
      mc_(&agent_, sa::SaClientConfig{sa::SaAddressFor(transport.port()), nullptr}) {}

bool Node::CheckTransportLocked() {
  if (!lost_.ok()) return false;
  absl::Status s = transport_.link_status();
  if (s.ok()) return false;
  lost_ = std::move(s);
  lost_seen_.store(true, std::memory_order_release);
  ++counters_.transport_lost;
  return true;
}

absl::optional<absl::Status> Node::TakeTransportLossLocked() {
  CheckTransportLocked();
  if (lost_.ok() || loss_taken_) return absl::nullopt;
  loss_taken_ = true;
  return lost_;
}

void Node::Process() {
  std::lock_guard<std::mutex> lock(mu_);
  StepLocked();
}

void Node::StepLocked() {
  const mad::TimePoint now = clock_.Now();
  ++counters_.steps;
  kicked_ = false;
  wheels_known_ = false;
  transport_.Drain([&](const mad::ReceivedMad& m) {
    if (m.data.size() > 1 && m.data[1] == kCmClass) {
      ++counters_.received_cm;
      cm_.HandleMad(now, m.from, m.data);
    } else {
      ++counters_.received_other;
      agent_.OnReceive(now, m);
    }
  });
  CheckTransportLocked();
  cm_.HandleTimeout(now);
  agent_.OnTimeout(now);
  mc_.Process(now);
  if (observer_ != nullptr) observer_->OnProgress(now);
  FlushLocked();
}

size_t Node::FlushLocked() {
  wheels_known_ = false;  // the call before it may have armed or cancelled timers
  size_t sent = 0;
  const uint64_t errors_before = counters_.send_errors;
  sent += cm_.DrainTransmit([this](const OutgoingMad& m) {
    if (!transport_.Send(m.to, m.mad).ok()) ++counters_.send_errors;
  });
  while (agent_.has_output()) {
    auto out = agent_.PollTransmit();
    if (!transport_.Send(out->to, out->data).ok()) ++counters_.send_errors;
    ++sent;
  }
  // A send found the transport gone: the next step tells the observer.
  if (counters_.send_errors != errors_before && CheckTransportLocked()) Rearm();
  return sent;
}

namespace {

absl::optional<mad::TimePoint> Earlier(absl::optional<mad::TimePoint> a,
                                       absl::optional<mad::TimePoint> b) {
  return b && (!a || *b < *a) ? b : a;
}

}  // namespace

absl::optional<mad::TimePoint> Node::NextDeadlineLocked() const {
  if (kicked_) return clock_.Now();
  if (!wheels_known_) {
    wheels_deadline_ = Earlier(cm_.NextDeadline(), agent_.NextDeadline());
    wheels_known_ = true;
  }
  // A wheel changed without FlushLocked / Rearm after it: a caller's bug.
  assert(wheels_deadline_ == Earlier(cm_.NextDeadline(), agent_.NextDeadline()));
  absl::optional<mad::TimePoint> d = wheels_deadline_;
  auto take = [&d](absl::optional<mad::TimePoint> e) { d = Earlier(d, e); };
  if (agent_.has_output()) take(clock_.Now());
  if (extra_deadline_) take(extra_deadline_());
  return d;
}

// ---------------------------------------------------------------- SimNode

SimNode::SimNode(sim::Scheduler& scheduler, mad::Transport& transport,
                 std::function<bool()> has_input, NodeOptions options)
    : Node(transport, scheduler.clock(), std::move(options)),
      scheduler_(scheduler),
      has_input_(std::move(has_input)) {
  scheduler_.AddActor(this);
}

SimNode::~SimNode() { scheduler_.RemoveActor(this); }

absl::optional<mad::TimePoint> SimNode::NextDeadline() const {
  if (has_input_ && has_input_()) return scheduler_.Now();
  // The lock is not needed: the simulation is single-threaded.
  return NextDeadlineLocked();
}

void SimNode::Wake(mad::TimePoint) { Process(); }

// ---------------------------------------------------------------- RealNode

uint64_t RandomSeed() {
  std::random_device os;
  return (uint64_t{os()} << 32) | os();
}

RealNode::RealNode(mad::Transport& transport, NodeOptions options)
    : Node(transport, RealClockInstance(), std::move(options)) {}

absl::StatusOr<std::unique_ptr<RealNode>> RealNode::Create(mad::Transport& transport,
                                                           NodeOptions options) {
  if (transport.fd() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport '", transport.caps().name,
        "' has no fd; a simulated transport needs SimNode (the simulation driver)"));
  }
  if (!options.seed.has_value()) options.seed = RandomSeed();
  std::unique_ptr<RealNode> n(new RealNode(transport, std::move(options)));
  absl::Status s = n->Init();
  if (!s.ok()) return s;
  return n;
}

absl::Status RealNode::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || timer_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/timerfd/eventfd: ", strerror(errno)));
  }
  for (int fd : {transport_.fd(), timer_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      // EBADF / EPERM on the transport's fd: not a real pollable descriptor
      // (umad2sim's fake fd). Fall back to draining it on a tick.
      if (fd == transport_.fd() && (errno == EBADF || errno == EPERM)) {
        transport_fd_watched_ = false;
        continue;
      }
      return absl::InternalError(absl::StrCat("epoll_ctl(", fd, "): ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

RealNode::~RealNode() {
  StopProgressThread();
  for (int fd : {epoll_fd_, timer_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

// The timerfd is set only when the deadline differs from the one it holds:
// most steps (a MAD in, its answer out) leave the earliest deadline where it
// was, and the syscall per wake was pure cost (under TCG a syscall is several
// microseconds). A timerfd that fired holds nothing: TimerFiredLocked forgets
// the armed value, so the same deadline, still due, is set again.
void RealNode::RearmTimer() {
  absl::optional<mad::TimePoint> d = NextDeadlineLocked();
  // CLOCK_MONOTONIC absolute; the RealClock epoch is CLOCK_MONOTONIC's. 0: disarmed.
  const int64_t ns = d.has_value() ? std::max<int64_t>(d->nanos(), 1) : 0;
  if (ns == armed_ns_) return;
  itimerspec its{};
  its.it_value.tv_sec = ns / 1000000000;
  its.it_value.tv_nsec = ns % 1000000000;
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
  armed_ns_ = ns;
  timer_arms_.fetch_add(1, std::memory_order_relaxed);
}

bool RealNode::ReadTimerFd(const epoll_event* evs, int n) {
  bool fired = false;
  for (int i = 0; i < n; ++i) fired |= evs[i].data.fd == timer_fd_;
  if (!fired) return false;  // no read(2) that can only say EAGAIN
  uint64_t expirations;
  while (read(timer_fd_, &expirations, sizeof expirations) > 0) {
  }
  timer_fires_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void RealNode::TimerFiredLocked() { armed_ns_ = kUnknownArm; }

void RealNode::UnwatchLostTransportLocked() {
  if (transport_fd_dropped_ || !transport_fd_watched_ || lost_.ok()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, transport_.fd(), nullptr);
  transport_fd_dropped_ = true;
}

absl::StatusOr<int> RealNode::Poll(mad::Duration timeout) {
  if (thread_.joinable()) {
    return absl::FailedPreconditionError("Poll: a progress thread drives this device");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    RearmTimer();
  }
  epoll_event evs[4];
  if (!transport_fd_watched_) timeout = std::min(timeout, kUnwatchedFdTick);
  int ms = static_cast<int>(std::min<int64_t>(timeout.nanos() / 1000000, INT32_MAX));
  int n = epoll_wait(epoll_fd_, evs, 4, ms);
  if (n < 0 && errno != EINTR) {
    return absl::InternalError(absl::StrCat("epoll_wait: ", strerror(errno)));
  }
  const bool fired = ReadTimerFd(evs, n);
  std::lock_guard<std::mutex> lock(mu_);
  if (fired) TimerFiredLocked();
  StepLocked();
  UnwatchLostTransportLocked();
  RearmTimer();
  return n < 0 ? 0 : n;
}

absl::Status RealNode::StartProgressThread() {
  if (thread_.joinable()) return absl::AlreadyExistsError("progress thread already running");
  stop_ = false;
  mad::SignalFreeThreads no_signals;  // for the thread's creation
  thread_ = std::thread([this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      RearmTimer();
    }
    while (!stop_) {
      epoll_event evs[4];
      const int wait_ms =
          transport_fd_watched_ ? 1000 : static_cast<int>(kUnwatchedFdTick.millis());
      const int n = epoll_wait(epoll_fd_, evs, 4, wait_ms);
      const bool fired = ReadTimerFd(evs, n);
      if (stop_) break;
      {
        // The step, then the deadline it leaves (user calls re-arm for
        // theirs under the same lock: Node::Rearm / RearmIfOutput).
        std::lock_guard<std::mutex> lock(mu_);
        if (fired) TimerFiredLocked();
        StepLocked();
        UnwatchLostTransportLocked();
        RearmTimer();
      }
      if (void (*fn)(void*) = after_step_.load(); fn != nullptr) fn(after_step_arg_.load());
    }
  });
  return absl::OkStatus();
}

void RealNode::StopProgressThread() {
  if (!thread_.joinable()) return;
  stop_ = true;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
  uint64_t junk;
  while (read(wake_fd_, &junk, sizeof junk) > 0) {
  }
}

}  // namespace uscm::cm
