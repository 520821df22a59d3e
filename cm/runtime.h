// The CM runtime: one "node" = one local port = a sans-IO CmEndpoint and a MAD
// Agent (with its SA client and multicast manager) over one Transport, with a
// clock and a driver. CM MADs (class 0x07) go to the endpoint, everything else
// to the agent.
//
// Two drivers share the same Process() step:
//   * simulation: the node is an Actor on a sim::Scheduler (virtual time);
//     it is woken at NextDeadline() or when a MAD waits in the transport.
//   * real: epoll on the transport fd plus a timerfd armed to the one next
//     deadline; Poll(timeout) for single-threaded use, or a progress thread.
//
// Every entry point takes the node's mutex, so API calls are safe from any
// thread. The owner of the node (the rdma_cm layer) sees the outputs of each
// step through NodeObserver::OnProgress, called with the mutex held.
#ifndef USCM_CM_RUNTIME_H_
#define USCM_CM_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "cm/endpoint.h"
#include "mad/agent.h"
#include "mad/sim/scheduler.h"
#include "mad/time.h"
#include "mad/transport.h"
#include "sa/client.h"
#include "sa/multicast.h"
#include "sa/path_cache.h"

struct epoll_event;  // <sys/epoll.h>

namespace uscm::cm {

struct NodeCounters {
  uint64_t steps = 0;           // Process() calls
  uint64_t received_cm = 0;     // MADs handed to the CM endpoint
  uint64_t received_other = 0;  // MADs handed to the agent
  uint64_t send_errors = 0;     // Transport::Send failures (the MAD is lost; retries cover it)
  uint64_t transport_lost = 0;  // 1 once the transport reported its loss (link_status)
};

class NodeObserver {
 public:
  virtual ~NodeObserver() = default;
  // After every step, with the node's mutex held: drain cm(), sa(), mc().
  virtual void OnProgress(mad::TimePoint now) = 0;
};

struct NodeOptions {
  CmConfig cm;
  mad::AgentConfig agent;
  // Seeds local communication IDs and starting PSNs. Unset: the simulation
  // uses 1 (reproducible runs); a real node draws one from the OS, so IDs and
  // PSNs differ between processes and across restarts (a peer still holding
  // the old connection in TimeWait would otherwise take the new one as stale).
  absl::optional<uint64_t> seed;
  size_t path_cache_capacity = 4096;
};

// A seed from the OS (getrandom via std::random_device).
uint64_t RandomSeed();

class Node {
 public:
  // `transport` and `clock` must outlive the node.
  Node(mad::Transport& transport, const mad::Clock& clock, NodeOptions options);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // One step at `now`: drain the transport, run due timers of the endpoint
  // and the agent, tell the observer, send everything queued. Takes the lock.
  void Process();
  // Sends what the endpoint and the agent queued (after a user call); the
  // caller holds the lock. Returns the number of MADs sent.
  size_t FlushLocked();
  // The earliest deadline of the endpoint and the agent (and `extra`).
  // The two timer wheels' part is kept between the points where a wheel can
  // change (a step, FlushLocked, Rearm, RearmIfOutput: every user call of the
  // rdma_cm layer ends with one of them); builds without NDEBUG check it
  // against the wheels at every call.
  absl::optional<mad::TimePoint> NextDeadlineLocked() const;

  std::mutex& mutex() { return mu_; }
  mad::TimePoint Now() const { return clock_.Now(); }
  void set_observer(NodeObserver* o) { observer_ = o; }
  // An additional deadline source (a fault injector's held MADs).
  void set_extra_deadline(std::function<absl::optional<mad::TimePoint>()> f) {
    extra_deadline_ = std::move(f);
  }
  // Called (lock held) after a user call: the next step runs at once, so
  // answers the call produced without any MAD (path cache hits, local
  // multicast joins) are delivered; the real driver re-arms its timer.
  void Rearm() {
    kicked_ = true;
    wheels_known_ = false;
    RearmTimer();
  }
  // Rearm after a user call of the CM endpoint or the SA client (connect,
  // accept, reject, establish, disconnect, destroy, a path query): their MADs
  // went out with FlushLocked and the answers come back as MADs, so the next
  // step runs at once only when an event or SA result already waits for the
  // observer (Rtu's ESTABLISHED, a path cache hit). Saves a step per call.
  void RearmIfOutput() {
    if (cm_.has_events() || sa_.pending_results() > 0) kicked_ = true;
    wheels_known_ = false;
    RearmTimer();
  }

  CmEndpoint& cm() { return cm_; }
  mad::Agent& agent() { return agent_; }
  sa::SaClient& sa() { return sa_; }
  sa::McManager& mc() { return mc_; }
  sa::PathCache& path_cache() { return cache_; }
  mad::Transport& transport() { return transport_; }
  const mad::LocalPort& port() const { return transport_.port(); }
  const NodeCounters& counters() const { return counters_; }
  // OK, or why the transport is gone for good (Transport::link_status), as
  // the last step or send saw it. Any thread may ask: the progress thread
  // writes it (the drop-in librdmacm asks it at every id's placement on a
  // port: uscm_device_transport_lost). While the transport is not lost (the
  // flag lost_seen_, set with lost_ where the loss is noted), no lock is
  // taken; the reason is read under the node's lock.
  absl::Status TransportStatus() {
    if (!lost_seen_.load(std::memory_order_acquire)) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }
  // The loss, once (the first call after it happened; lock held): the
  // observer's OnProgress asks for it. Later calls return nullopt.
  absl::optional<absl::Status> TakeTransportLossLocked();
  // Tests: the transport is lost for good from now on, as if link_status
  // said `why`; the next step (run at once) hands the loss on.
  void LoseTransportForTesting(absl::Status why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_.ok()) {
      lost_ = std::move(why);
      lost_seen_.store(true, std::memory_order_release);
      ++counters_.transport_lost;
    }
    Rearm();
  }

 protected:
  void StepLocked();

  mad::Transport& transport_;
  const mad::Clock& clock_;
  std::mutex mu_;
  CmEndpoint cm_;
  mad::Agent agent_;
  sa::PathCache cache_;
  sa::SaClient sa_;
  sa::McManager mc_;
  NodeObserver* observer_ = nullptr;
  std::function<absl::optional<mad::TimePoint>()> extra_deadline_;
  NodeCounters counters_;
  bool kicked_ = false;
  // NextDeadlineLocked's cache of the earliest of cm_'s and agent_'s timer
  // wheels, valid while wheels_known_.
  mutable bool wheels_known_ = false;
  mutable absl::optional<mad::TimePoint> wheels_deadline_;
  // The transport's loss (Transport::link_status) and whether it was handed out.
  absl::Status lost_;
  // !lost_.ok(), for TransportStatus without the lock (written under it).
  std::atomic<bool> lost_seen_{false};
  bool loss_taken_ = false;

 private:
  // Notes a loss of the transport; true when it is new.
  bool CheckTransportLocked();
  virtual void RearmTimer() {}
};

// Simulation driver: an Actor on the scheduler. `has_input` says whether a
// MAD waits (SimTransport::pending() of the QP under any middleware).
class SimNode final : public Node, public sim::Actor {
 public:
  SimNode(sim::Scheduler& scheduler, mad::Transport& transport, std::function<bool()> has_input,
          NodeOptions options);
  ~SimNode() override;

  absl::optional<mad::TimePoint> NextDeadline() const override;
  void Wake(mad::TimePoint now) override;

 private:
  sim::Scheduler& scheduler_;
  std::function<bool()> has_input_;
};

// Real driver: epoll on the transport fd and a timerfd. A transport fd that
// epoll cannot watch (ibsim's umad2sim hands out fake descriptors >= 1024
// that only its poll(2) wrapper understands) is drained on a short tick
// instead: every wait is capped at kUnwatchedFdTick.
class RealNode final : public Node {
 public:
  static absl::StatusOr<std::unique_ptr<RealNode>> Create(mad::Transport& transport,
                                                          NodeOptions options);
  ~RealNode() override;

  // Waits up to `timeout` for a MAD or a deadline, then runs one step.
  // Returns the number of ready fds (0 on timeout). Do not mix with a
  // progress thread (FailedPrecondition).
  absl::StatusOr<int> Poll(mad::Duration timeout);
  absl::Status StartProgressThread();
  void StopProgressThread();
  bool has_progress_thread() const { return thread_.joinable(); }
  // Called by the progress thread after every step, with no lock held: the
  // events the step posted are in their channels, so a layer above can hand
  // them on from this thread instead of waking a thread of its own (one
  // scheduler hop less per event). nullptr: nothing. Any thread may set it.
  void SetAfterStep(void (*fn)(void*), void* arg) {
    after_step_arg_.store(arg);
    after_step_.store(fn);
  }
  // The epoll fd: readable when Poll has work (for an outer event loop).
  int fd() const { return epoll_fd_; }
  // False when the transport fd could not join the epoll set (see above).
  bool transport_fd_watched() const { return transport_fd_watched_; }
  // True once the lost transport's fd left the epoll set (UnwatchLostTransportLocked).
  bool transport_fd_dropped() const { return transport_fd_dropped_; }
  static constexpr mad::Duration kUnwatchedFdTick = mad::Duration::Millis(1);
  // timerfd_settime calls (only when the deadline changed) and wakes by the
  // timerfd: what the runtime's tests and benches count.
  uint64_t timer_arms() const { return timer_arms_.load(std::memory_order_relaxed); }
  uint64_t timer_fires() const { return timer_fires_.load(std::memory_order_relaxed); }

 private:
  static constexpr int64_t kUnknownArm = -1;
  RealNode(mad::Transport& transport, NodeOptions options);
  absl::Status Init();
  void RearmTimer() override;
  // Drains the timerfd when epoll reported it among `evs`; whether it fired.
  bool ReadTimerFd(const epoll_event* evs, int n);
  // The timerfd fired, so it holds no deadline any more (lock held).
  void TimerFiredLocked();
  // Once the transport is lost (Node::transport_status), its fd leaves the
  // epoll set (lock held): a umad file whose device was removed is reported
  // ready (EPOLLERR) for ever, and the thread spun on it.
  void UnwatchLostTransportLocked();

  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that stops the progress thread
  int64_t armed_ns_ = kUnknownArm;  // what the timerfd holds (lock held); 0: disarmed
  std::atomic<uint64_t> timer_arms_{0};
  std::atomic<uint64_t> timer_fires_{0};
  bool transport_fd_watched_ = true;
  // Written by the thread that steps (the progress thread, or Poll's caller).
  bool transport_fd_dropped_ = false;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<void (*)(void*)> after_step_{nullptr};
  std::atomic<void*> after_step_arg_{nullptr};
};

}  // namespace uscm::cm

#endif  // USCM_CM_RUNTIME_H_
