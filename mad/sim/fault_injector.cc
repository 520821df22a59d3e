#include "mad/sim/fault_injector.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace uscm::sim {
namespace {

absl::Status Validate(const FaultSpec& s, absl::string_view dir) {
  for (double p : {s.drop, s.bit_flip, s.duplicate, s.reorder}) {
    if (!(p >= 0 && p <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": probabilities must be in [0, 1]"));
    }
  }
  if (s.delay < Duration::Zero() || s.delay_jitter < Duration::Zero() ||
      s.reorder_delay < Duration::Zero()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": delays must not be negative"));
  }
  return absl::OkStatus();
}

}  // namespace

bool FaultSpec::active() const {
  return drop > 0 || bit_flip > 0 || duplicate > 0 || delay > Duration::Zero() ||
         delay_jitter > Duration::Zero() || reorder > 0;
}

absl::StatusOr<std::unique_ptr<FaultInjector>> FaultInjector::Create(mad::Transport& inner,
                                                                     const mad::Clock& clock,
                                                                     FaultInjectorOptions options) {
  if (absl::Status s = Validate(options.send, "send faults"); !s.ok()) return s;
  if (absl::Status s = Validate(options.receive, "receive faults"); !s.ok()) return s;
  return std::unique_ptr<FaultInjector>(new FaultInjector(inner, clock, std::move(options)));
}

FaultInjector::FaultInjector(mad::Transport& inner, const mad::Clock& clock,
                             FaultInjectorOptions options)
    : ForwardingTransport(inner), clock_(clock), options_(std::move(options)), rng_(options_.seed),
      caps_(inner.caps()) {
  caps_.name = absl::StrCat("faults+", caps_.name);
}

void FaultInjector::Inject(const FaultSpec& spec, FaultCounters& counters, std::vector<Held>& queue,
                           const mad::MadAddress& addr, std::span<const uint8_t> mad) {
  counters.seen++;
  if (rng_.Bernoulli(spec.drop)) {
    counters.dropped++;
    return;
  }
  Held h;
  h.addr = addr;
  h.data.assign(mad.begin(), mad.end());
  if (!h.data.empty() && rng_.Bernoulli(spec.bit_flip)) {
    const uint64_t bit = rng_.Below(h.data.size() * 8);
    h.data[bit / 8] ^= static_cast<uint8_t>(0x80 >> (bit % 8));
    counters.bit_flipped++;
  }
  const int copies = rng_.Bernoulli(spec.duplicate) ? 2 : 1;
  if (copies == 2) counters.duplicated++;
  for (int c = 0; c < copies; ++c) {
    Duration d = spec.delay + rng_.UpTo(spec.delay_jitter);
    if (rng_.Bernoulli(spec.reorder)) {
      d += spec.reorder_delay;
      counters.reordered++;
    }
    if (d > Duration::Zero()) counters.delayed++;
    if (queue.size() >= options_.max_held) {
      counters.overflow++;
      continue;
    }
    Held copy = c + 1 < copies ? h : std::move(h);
    copy.due = clock_.Now() + d;
    copy.seq = next_seq_++;
    queue.push_back(std::move(copy));
    std::push_heap(queue.begin(), queue.end(), Later);
  }
}

absl::Status FaultInjector::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  if (!options_.send.active() && held_send_.empty()) return inner_.Send(to, mad);
  Inject(options_.send, send_counters_, held_send_, to, mad);
  return SendDue();
}

absl::Status FaultInjector::SendDue() {
  absl::Status last = absl::OkStatus();
  const TimePoint now = clock_.Now();
  while (!held_send_.empty() && held_send_.front().due <= now) {
    std::pop_heap(held_send_.begin(), held_send_.end(), Later);
    Held h = std::move(held_send_.back());
    held_send_.pop_back();
    if (absl::Status s = inner_.Send(h.addr, h.data); !s.ok()) {
      send_counters_.send_errors++;
      last = s;
    }
  }
  return last;
}

void FaultInjector::ReleaseDue() { SendDue().IgnoreError(); }

size_t FaultInjector::Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) {
  ReleaseDue();
  if (!options_.receive.active() && held_recv_.empty()) return inner_.Drain(sink, max);
  inner_.Drain(
      [&](const mad::ReceivedMad& m) {
        Inject(options_.receive, recv_counters_, held_recv_, m.from, m.data);
      },
      max);
  size_t n = 0;
  const TimePoint now = clock_.Now();
  while (n < max && !held_recv_.empty() && held_recv_.front().due <= now) {
    std::pop_heap(held_recv_.begin(), held_recv_.end(), Later);
    Held h = std::move(held_recv_.back());
    held_recv_.pop_back();
    sink(mad::ReceivedMad{h.addr, h.data});
    ++n;
  }
  return n;
}

absl::optional<TimePoint> FaultInjector::NextDeadline() const {
  absl::optional<TimePoint> t;
  for (const std::vector<Held>* q : {&held_send_, &held_recv_}) {
    if (!q->empty() && (!t.has_value() || q->front().due < *t)) t = q->front().due;
  }
  return t;
}

}  // namespace uscm::sim
