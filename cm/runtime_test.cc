// cm::RealNode's progress thread and its timerfd: the timer is set only when
// the node's deadline changed, and a deadline that fired is set again when it
// is still the earliest. A fd-backed transport (an eventfd: readable = "a
// wake-up", no MADs) drives the steps; an extra deadline source sets the
// deadline the node reports.
#include "cm/runtime.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace uscm::cm {
namespace {

// Readable while a wake-up is pending; delivers no MADs and drops what is sent.
class WakeTransport final : public mad::Transport {
 public:
  WakeTransport() : efd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    caps_.name = "wake";
    port_.ca_name = "wake0";
    port_.lid = 1;
    port_.pkeys = {0xFFFF};
  }
  ~WakeTransport() override { close(efd_); }
  void Wake() {
    const uint64_t one = 1;
    (void)!write(efd_, &one, sizeof one);
  }
  absl::Status Send(const mad::MadAddress&, std::span<const uint8_t>) override {
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)>, size_t) override {
    if (dead_) return 0;  // as a dead umad file: reads fail, the fd stays ready
    uint64_t v;
    (void)!read(efd_, &v, sizeof v);
    return 0;
  }
  int fd() const override { return efd_; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }
  absl::Status link_status() const override {
    return dead_ ? absl::UnavailableError("wake0 is gone") : absl::OkStatus();
  }
  // From now on the fd is ready for ever and the transport lost.
  void Die() {
    dead_ = true;
    Wake();
  }

 private:
  int efd_;
  bool dead_ = false;
  mad::TransportCaps caps_;
  mad::LocalPort port_;
};

// Counts the steps (OnProgress runs under the node's lock, after each step)
// and those that ran at or after `due`.
class StepCounter final : public NodeObserver {
 public:
  void OnProgress(mad::TimePoint now) override {
    std::lock_guard<std::mutex> l(mu_);
    ++steps_;
    if (due_.has_value() && now >= *due_) ++steps_after_due_;
    cv_.notify_all();
  }
  void set_due(mad::TimePoint due) {
    std::lock_guard<std::mutex> l(mu_);
    due_ = due;
  }
  // Waits (at most `bound`, a bound and not a measurement) until `pred()`.
  template <typename Pred>
  bool WaitFor(Pred pred, std::chrono::seconds bound = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, bound, [&] { return pred(steps_, steps_after_due_); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int steps_ = 0;
  int steps_after_due_ = 0;
  absl::optional<mad::TimePoint> due_;
};

struct Fixture {
  WakeTransport transport;
  StepCounter counter;
  std::unique_ptr<RealNode> node;
  std::atomic<int64_t> deadline_ns{0};  // 0: no extra deadline

  Fixture() {
    auto n = RealNode::Create(transport, NodeOptions{});
    EXPECT_TRUE(n.ok()) << n.status();
    node = std::move(*n);
    node->set_observer(&counter);
    node->set_extra_deadline([this]() -> absl::optional<mad::TimePoint> {
      const int64_t ns = deadline_ns.load();
      if (ns == 0) return absl::nullopt;
      return mad::TimePoint::FromNanos(ns);
    });
  }
  ~Fixture() { node->StopProgressThread(); }
};

// 200 wake-ups with the same deadline (an hour away) all along: 200 steps,
// and the timerfd set once (before: once before every wait and once after
// every step, ~400 syscalls).
TEST(RealNodeTimerTest, AnUnchangedDeadlineIsNotSetAgain) {
  Fixture f;
  f.deadline_ns = (f.node->Now() + mad::Duration::Seconds(3600)).nanos();
  ASSERT_TRUE(f.node->StartProgressThread().ok());
  constexpr int kWakes = 200;
  int seen = 0;
  for (int i = 0; i < kWakes; ++i) {
    // One wake-up at a time: each is a step of its own.
    f.transport.Wake();
    ASSERT_TRUE(f.counter.WaitFor([&](int steps, int) { return steps > seen && (seen = steps); }))
        << "no step after wake-up " << i;
  }
  EXPECT_GE(seen, kWakes);
  EXPECT_EQ(f.node->timer_arms(), 1u) << "the timerfd was set again for an unchanged deadline";
  EXPECT_EQ(f.node->timer_fires(), 0u);
}

// A deadline the node keeps reporting after it fired (already due): the
// timerfd is set again each time, so the node steps again at once, not at
// the next one-second wake-up. Three rounds of "fire, step, same deadline"
// must come from the timerfd (timer_fires), each set anew (timer_arms).
TEST(RealNodeTimerTest, ADeadlineThatFiredIsSetAgainWhenStillDue) {
  Fixture f;
  const mad::TimePoint due = f.node->Now() + mad::Duration::Millis(20);
  f.counter.set_due(due);
  f.deadline_ns = due.nanos();
  ASSERT_TRUE(f.node->StartProgressThread().ok());
  ASSERT_TRUE(f.counter.WaitFor([](int, int after_due) { return after_due >= 3; }));
  // Each step at or after `due` left the same (past) deadline: without the
  // re-arm the timerfd stays empty and the steps come from epoll's 1 s
  // timeout, with timer_fires stuck at 1.
  EXPECT_GE(f.node->timer_fires(), 3u);
  EXPECT_GE(f.node->timer_arms(), 3u);
  f.deadline_ns = 0;  // nothing due: the node goes quiet
}

// A changed deadline is set: an earlier one makes the node step at it.
TEST(RealNodeTimerTest, AnEarlierDeadlineIsSet) {
  Fixture f;
  f.deadline_ns = (f.node->Now() + mad::Duration::Seconds(3600)).nanos();
  ASSERT_TRUE(f.node->StartProgressThread().ok());
  f.transport.Wake();
  ASSERT_TRUE(f.counter.WaitFor([](int steps, int) { return steps >= 1; }));
  const uint64_t arms = f.node->timer_arms();
  const mad::TimePoint due = f.node->Now() + mad::Duration::Millis(10);
  f.counter.set_due(due);
  {
    std::lock_guard<std::mutex> lock(f.node->mutex());
    f.deadline_ns = due.nanos();
    f.node->Rearm();  // what a user call does under the lock
  }
  ASSERT_TRUE(f.counter.WaitFor([](int, int after_due) { return after_due >= 1; }));
  EXPECT_GT(f.node->timer_arms(), arms);
  EXPECT_GE(f.node->timer_fires(), 1u);
  f.deadline_ns = 0;
}

// The progress thread blocks every signal: the program's signals are the
// program's. The kernel gives a process-directed signal (kill(2) of the pid)
// to any thread that does not block it, and a program that blocks one in its
// own threads and reads it from a signalfd cannot block it in a thread a
// library started. tgt's tgtd does so with SIGUSR2 (its backing-store
// threads kill(getpid(), SIGUSR2) for each finished I/O): on uscm's drop-in
// librdmacm, tgtd died of SIGUSR2 at the first READ (68-dropin-iser). Without
// the blocked mask this test's process dies the same way.
TEST(RealNodeThreadTest, TheProgramsSignalsReachTheProgram) {
  // As in tgtd when the library starts its threads: SIGUSR2 not blocked yet
  // (the test runner may start the test with it blocked).
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_UNBLOCK, &usr2, &old), 0);
  Fixture f;
  ASSERT_TRUE(f.node->StartProgressThread().ok());
  // Its first step: the thread runs with its own mask (glibc's pthread_create
  // starts a thread with every signal blocked until it sets the mask it got).
  f.transport.Wake();
  ASSERT_TRUE(f.counter.WaitFor([](int steps, int) { return steps >= 1; }));
  int others = 0, taking = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    if (task.path().filename() == std::to_string(gettid())) continue;
    ++others;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) != 0) continue;
      if ((std::stoull(line.substr(8), nullptr, 16) & (1ull << (SIGUSR2 - 1))) == 0) ++taking;
    }
  }
  EXPECT_GE(others, 1) << "no progress thread";
  EXPECT_EQ(taking, 0) << "threads that would take the program's SIGUSR2";

  // tgtd's scheme, with the progress thread running.
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr2, nullptr), 0);
  const int fd = signalfd(-1, &usr2, SFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(kill(getpid(), SIGUSR2), 0);
  pollfd p = {fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1) << "SIGUSR2 did not reach the signalfd";
  signalfd_siginfo info = {};
  EXPECT_EQ(read(fd, &info, sizeof info), static_cast<ssize_t>(sizeof info));
  EXPECT_EQ(info.ssi_signo, static_cast<uint32_t>(SIGUSR2));
  close(fd);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// A umad file whose device was removed reads EIO, and epoll reports it ready
// for ever (the kernel's ib_umad_poll: EPOLLERR once the port's agents are
// dead): once the transport says it is lost, its fd leaves the epoll set.
// Before, every wait returned at once: uscmd and a program's progress thread
// spun on the dead file after `rdma link del`.
TEST(RealNodeLossTest, ALostTransportsFdLeavesTheEpollSet) {
  Fixture f;
  f.transport.Wake();
  ASSERT_EQ(f.node->Poll(mad::Duration::Zero()).value_or(-1), 1);
  EXPECT_EQ(f.node->Poll(mad::Duration::Zero()).value_or(-1), 0);  // drained
  f.transport.Die();
  ASSERT_EQ(f.node->Poll(mad::Duration::Zero()).value_or(-1), 1);  // the step that sees it
  EXPECT_EQ(f.node->counters().transport_lost, 1u);
  EXPECT_TRUE(f.node->transport_fd_dropped());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f.node->Poll(mad::Duration::Zero()).value_or(-1), 0) << "still woken by the dead fd";
  }
  EXPECT_TRUE(f.node->transport_fd_watched());  // it was pollable: no tick instead
}

}  // namespace
}  // namespace uscm::cm
