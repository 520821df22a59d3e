// uscm rdma_cm API: the event channel (rdma_event_channel): the event queue,
// its pollable fd, and the calls that take events from it or destroy ids.
#include "api/rdma_cm/rdma_cm.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace uscm {

using mad::TimePoint;

EventChannel::~EventChannel() {
  if (fd_ >= 0) close(fd_);
}

int EventChannel::fd() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) {
    fd_ = eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE | EFD_CLOEXEC);
    if (fd_ < 0) return -1;
    fd_readable_ = false;
    SyncFdLocked();  // events queued before anyone asked make it readable now
  }
  return fd_;
}

uint64_t EventChannel::fd_syscalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fd_syscalls_;
}

// The eventfd holds 1 exactly while the queue is not empty: written on the
// empty -> non-empty transition, read when the queue drains (a burst of
// events costs two syscalls, not two per event). No fd yet: nothing to do.
void EventChannel::SyncFdLocked() const {
  queued_.store(queue_.size(), std::memory_order_release);
  const bool want = !queue_.empty();
  if (fd_ < 0 || want == fd_readable_) return;
  uint64_t v = 1;
  if (want) {
    (void)!write(fd_, &v, sizeof v);
  } else {
    (void)!read(fd_, &v, sizeof v);
  }
  ++fd_syscalls_;
  fd_readable_ = want;
}

void EventChannel::Push(std::unique_ptr<Event> e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (e->id != nullptr) ++e->id->unacked_;
  queue_.push_back(std::move(e));
  SyncFdLocked();
}

namespace {

// Back to a default Event. Copy-assigning from an empty vector or string
// keeps the target's capacity: a recycled event's private data buffers take
// the next event's bytes without allocating.
void ResetForReuse(Event& e) {
  static const Event kBlank;
  e = kBlank;
}

}  // namespace

std::unique_ptr<Event> EventChannel::NewEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.empty()) return std::make_unique<Event>();
  std::unique_ptr<Event> e = std::move(spare_.back());
  spare_.pop_back();
  return e;
}

absl::StatusOr<CmId*> EventChannel::CreateId(void* context, PortSpace ps) {
  switch (ps) {
    case PortSpace::kTcp:
    case PortSpace::kUdp:
    case PortSpace::kIb:
    case PortSpace::kIpoib:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "create_id: port space 0x", absl::Hex(static_cast<uint16_t>(ps)),
          " is not one of RDMA_PS_TCP 0x106, RDMA_PS_UDP 0x111, RDMA_PS_IB 0x13f, "
          "RDMA_PS_IPOIB 0x2"));
  }
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return device_->NewId(this, context, ps);
}

absl::StatusOr<Event*> EventChannel::GetEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) {
    return absl::UnavailableError("get_cm_event: no event queued; wait until fd() is readable");
  }
  std::unique_ptr<Event> e = std::move(queue_.front());
  queue_.pop_front();
  SyncFdLocked();
  Event* raw = e.get();
  delivered_.push_back(std::move(e));
  return raw;
}

absl::StatusOr<Event*> EventChannel::WaitEvent(mad::Duration timeout) {
  const TimePoint end = mad::RealClock().Now() + timeout;
  for (;;) {
    absl::StatusOr<Event*> e = GetEvent();
    if (e.ok() || device_->simulated()) return e;
    const mad::Duration left = end - mad::RealClock().Now();
    if (left <= mad::Duration::Zero()) return e;
    if (device_->real_->has_progress_thread()) {
      pollfd p{fd(), POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::max<int64_t>(left.nanos() / 1000000, 1)));
    } else {
      absl::StatusOr<int> n = device_->Poll(std::min(left, mad::Duration::Millis(10)));
      if (!n.ok()) return n.status();
    }
  }
}

absl::Status EventChannel::AckEvent(Event* event) {
  std::lock_guard<std::mutex> lock(mu_);
  // From the newest: a program that acks as it goes finds it at once. The
  // pointer is compared, never read, until found (it may be anything).
  auto it = delivered_.end();
  while (it != delivered_.begin()) {
    --it;
    if (it->get() == event) break;
  }
  if (it == delivered_.end() || it->get() != event) {
    return absl::NotFoundError(
        "ack_cm_event: not an event of this channel that was retrieved and not yet acked");
  }
  std::unique_ptr<Event> acked = std::move(*it);
  *it = std::move(delivered_.back());
  delivered_.pop_back();
  if (event->id != nullptr) --event->id->unacked_;
  if (spare_.size() < kMaxSpareEvents) {
    ResetForReuse(*event);
    spare_.push_back(std::move(acked));
  }
  return absl::OkStatus();
}

absl::Status EventChannel::DestroyId(CmId* id) {
  std::lock_guard<std::mutex> dlock(device_->node_->mutex());
  if (id == nullptr || !device_->ids_.contains(id) || id->channel_ != this) {
    return absl::NotFoundError("destroy_id: unknown id (destroyed, or of another channel)");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    int retrieved = 0;
    for (const std::unique_ptr<Event>& e : delivered_) retrieved += e->id == id;
    if (retrieved > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "destroy_id: ", retrieved,
          " retrieved event(s) of this id are not acked; ack_cm_event them first"));
    }
    // Queued, never retrieved: dropped. A queued CONNECT_REQUEST of a child of
    // this listener takes the child with it.
    std::vector<CmId*> orphans;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->id == id || (*it)->listen_id == id) {
        if ((*it)->listen_id == id && (*it)->id != id) orphans.push_back((*it)->id);
        --(*it)->id->unacked_;
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    SyncFdLocked();
    for (CmId* o : orphans) o->state_ = IdState::kDestroying;
    for (CmId* o : orphans) {
      // Reject on the orphan's behalf (REJ 28), then free it.
      (void)device_->node_->cm().Destroy(device_->node_->Now(), o->conn_);
    }
    for (CmId* o : orphans) device_->FreeId(o);
  }
  // Leaving multicast groups is the multicast manager's work, done in a step.
  const bool joined = !id->joins_.empty();
  device_->FreeId(id);
  device_->node_->FlushLocked();
  if (joined) {
    device_->node_->Rearm();
  } else {
    device_->node_->RearmIfOutput();
  }
  return absl::OkStatus();
}

size_t EventChannel::unacked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return delivered_.size();
}

}  // namespace uscm
