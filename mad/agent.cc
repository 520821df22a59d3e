#include "mad/agent.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "mad/wire/mad_header.h"

namespace uscm::mad {
namespace {

constexpr uint8_t kTrapRepress = 0x07;
constexpr uint8_t kSet = 0x02;
constexpr uint8_t kTrap = 0x05;
constexpr uint8_t kGetResp = 0x81;

// Classes whose data area starts with an RMPP header (Linux ib_is_mad_class_rmpp).
bool UsesRmpp(uint8_t mgmt_class) {
  return mgmt_class == 0x03 || mgmt_class == 0x06 || mgmt_class == 0x0C ||
         (mgmt_class >= 0x30 && mgmt_class <= 0x4F);
}

bool IsResponse(uint8_t method) {
  return (method & wire::kMethodResponseBit) != 0 || method == kTrapRepress;
}

// Whether `response` answers a request with `request` method.
bool MethodAnswers(uint8_t request, uint8_t response) {
  if (response == (request | wire::kMethodResponseBit)) return true;
  if (request == kSet && response == kGetResp) return true;
  return request == kTrap && response == kTrapRepress;
}

std::string MethodText(uint8_t method) {
  const char* name = wire::MethodName(static_cast<wire::Method>(method));
  return name ? std::string(name) : absl::StrFormat("method 0x%02x", method);
}

void StoreTid(Mad& mad, uint64_t tid) {
  for (int i = 0; i < 8; ++i) mad[8 + i] = static_cast<uint8_t>(tid >> (56 - 8 * i));
}

uint64_t LoadTid(std::span<const uint8_t> mad) {
  uint64_t tid = 0;
  for (int i = 0; i < 8; ++i) tid = tid << 8 | mad[8 + i];
  return tid;
}

MadAddress ReplyTo(const MadAddress& from) {
  MadAddress to = from;
  to.qkey = kQp1Qkey;
  return to;
}

}  // namespace

Agent::Agent(AgentConfig config, TimePoint now)
    : config_(std::move(config)), wheel_(now, config_.tick), next_tid_(config_.first_tid) {}

uint64_t Agent::DestKey(const MadAddress& to) {
  if (to.has_grh) return absl::HashOf(to.gid) | 1;  // odd: never a plain LID
  return uint64_t{to.lid} << 1;
}

// Estimates kept for this many destinations at most (an agent talks to the
// SA and a few peers; a flood of destinations only forgets estimates).
constexpr size_t kMaxRtoDestinations = 4096;

Agent::Responder& Agent::ResponderFor(uint64_t dest) {
  auto it = responders_.find(dest);
  if (it != responders_.end()) return it->second;
  if (responders_.size() >= kMaxRtoDestinations) responders_.erase(responders_.begin());
  RtoConfig rc;
  rc.initial = config_.base_timeout;
  rc.floor = std::min(config_.min_timeout, config_.base_timeout);
  rc.granularity = config_.tick;
  rc.ceiling = config_.max_timeout;
  return responders_.emplace(dest, Responder{RtoEstimator(rc), TimePoint()}).first->second;
}

void Agent::SetResponseBound(const MadAddress& to, Duration bound) {
  ResponderFor(DestKey(to)).rto.SetBound(bound);
}

const RtoEstimator* Agent::Rto(const MadAddress& to) const {
  auto it = responders_.find(DestKey(to));
  return it == responders_.end() ? nullptr : &it->second.rto;
}

Duration Agent::AttemptTimeout(const Request& r) const {
  Duration t = config_.base_timeout;
  if (config_.adaptive_timeout) {
    auto it = responders_.find(r.dest);
    if (it != responders_.end()) t = it->second.rto.rto();
  }
  for (int i = 0; i < r.retries && t < config_.max_timeout; ++i) {
    t = t * std::max(config_.backoff_factor, 1);
  }
  return std::min(t, config_.max_timeout);
}

TimerHandle Agent::Arm(TimerKind kind, uint64_t id, TimePoint deadline) {
  return wheel_.Schedule(deadline, uint64_t{static_cast<uint8_t>(kind)} << 56 | id);
}

void Agent::ArmRequest(Request& r, TimePoint deadline) {
  r.attempt_end = deadline;
  if (r.deadline.has_value() && *r.deadline < deadline) deadline = *r.deadline;
  wheel_.Cancel(r.timer);
  r.timer = Arm(TimerKind::kRequest, r.id, deadline);
}

absl::StatusOr<RequestId> Agent::SendRequest(TimePoint now, const MadAddress& to,
                                             std::span<const uint8_t> mad, uint64_t cookie,
                                             CompletionSink* sink,
                                             absl::optional<TimePoint> deadline) {
  if (mad.size() != kMadSize) {
    return absl::InvalidArgumentError(
        absl::StrFormat("request MAD is %d bytes; MADs are %d", mad.size(), kMadSize));
  }
  auto header = wire::MadHeader::Parse(mad);
  if (!header.ok()) return header.status();
  if (IsResponse(header->method)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is a response method; SendRequest takes requests (use SendUntracked)",
        MethodText(header->method)));
  }
  while (next_tid_ == 0 || by_match_.contains(MatchKey(header->mgmt_class, next_tid_)) ||
         linger_by_match_.contains(MatchKey(header->mgmt_class, next_tid_))) {
    ++next_tid_;
  }
  const uint32_t tid_low = next_tid_++;
  const RequestId id = next_id_++;
  Request& r = requests_[id];
  r.id = id;
  r.cookie = cookie;
  r.sink = sink;
  r.tid_low = tid_low;
  r.mgmt_class = header->mgmt_class;
  r.method = header->method;
  r.attribute_id = header->attribute_id;
  r.to = to;
  r.deadline = deadline;
  std::memcpy(r.mad.data(), mad.data(), kMadSize);
  StoreTid(r.mad, uint64_t{config_.tid_high} << 32 | tid_low);
  r.dest = DestKey(to);
  by_match_[MatchKey(r.mgmt_class, tid_low)] = id;
  Destination& d = destinations_[r.dest];
  d.waiting.push_back(id);
  StartWaiting(r.dest, now);
  if (!r.started) {
    ++counters_.queued;
    if (deadline.has_value()) ArmRequest(requests_.at(id), *deadline);  // fails while waiting
  }
  return id;
}

bool Agent::ExtendDeadline(RequestId id, absl::optional<TimePoint> deadline) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  Request& r = it->second;
  if (!r.deadline.has_value() || (deadline.has_value() && *deadline <= *r.deadline)) return true;
  r.deadline = deadline;
  // The timer was cut at the old deadline (or, for a request waiting for
  // the window, was the deadline): armed again at the attempt's own end, cut
  // at the new deadline. No timer (an RMPP transfer's own runs): none armed.
  if (!wheel_.Cancel(r.timer)) return true;
  if (!r.started) {
    r.timer = deadline.has_value() ? Arm(TimerKind::kRequest, r.id, *deadline) : TimerHandle();
    return true;
  }
  ArmRequest(r, r.attempt_end);
  return true;
}

uint64_t Agent::StartTimer(TimePoint at, TimerSink* sink, uint64_t cookie) {
  const uint64_t id = next_caller_timer_++;
  caller_timers_[id] = CallerTimer{sink, cookie, Arm(TimerKind::kCaller, id, at)};
  return id;
}

bool Agent::CancelTimer(uint64_t timer_id) {
  auto it = caller_timers_.find(timer_id);
  if (it == caller_timers_.end()) return false;
  wheel_.Cancel(it->second.timer);
  caller_timers_.erase(it);
  return true;
}

void Agent::Transmit(Request& r, TimePoint now) {
  out_.push_back(OutgoingMad{r.to, r.mad});
  r.last_sent = now;
  ArmRequest(r, now + AttemptTimeout(r));
}

void Agent::Release(Request& r, TimePoint now) {
  if (!r.in_window) return;
  r.in_window = false;
  auto it = destinations_.find(r.dest);
  if (it == destinations_.end()) return;
  std::erase(it->second.slots, r.id);
  StartWaiting(r.dest, now);
}

bool Agent::PresumedLost(TimePoint now, RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second.started) return false;
  const Request& r = it->second;
  if (r.retries > 0) return true;
  auto resp = responders_.find(r.dest);
  if (!config_.adaptive_timeout || resp == responders_.end() || !resp->second.rto.has_sample()) {
    return false;
  }
  const RtoEstimator& e = resp->second.rto;
  return now - r.last_sent > std::max(e.srtt() * 2, e.srtt() + e.rttvar() * 4);
}

bool Agent::LostByLaterAnswer(const Request& r, TimePoint now) const {
  if (!config_.adaptive_timeout) return false;
  auto it = responders_.find(r.dest);
  if (it == responders_.end() || !(r.last_sent < it->second.newest_answered) ||
      !it->second.rto.has_sample()) {
    return false;
  }
  const Duration srtt = it->second.rto.srtt();
  return now - r.last_sent > srtt + srtt / 4;  // RFC 8985: RTT + reo_wnd (min_RTT / 4)
}

absl::Status Agent::SendUntracked(const MadAddress& to, std::span<const uint8_t> mad) {
  if (mad.size() != kMadSize) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MAD is %d bytes; MADs are %d", mad.size(), kMadSize));
  }
  OutgoingMad& o = out_.emplace_back();
  o.to = to;
  std::memcpy(o.data.data(), mad.data(), kMadSize);
  return absl::OkStatus();
}

absl::Status Agent::SendRmpp(TimePoint now, const MadAddress& to,
                             std::span<const uint8_t> header,
                             std::span<const uint8_t> payload) {
  if (header.size() < kSaHeadersBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RMPP header is %d bytes; MAD + RMPP + SA headers take %d", header.size(),
        kSaHeadersBytes));
  }
  const size_t max_payload = size_t{config_.rmpp.max_segments} * kRmppSegmentData;
  if (payload.size() > max_payload) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RMPP payload is %d bytes; at most %d (%d segments)", payload.size(), max_payload,
        config_.rmpp.max_segments));
  }
  const SendKey key{LoadTid(header), to.lid, to.qpn};
  if (senders_.contains(key)) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "an RMPP transfer with TID 0x%016x to LID %d QPN %d is already running", key.tid,
        to.lid, to.qpn));
  }
  Sender& s = senders_[key];
  s.rmpp = std::make_unique<RmppSender>(config_.rmpp, &counters_.rmpp, to, header, payload);
  s.rmpp->Start(now, &scratch_);
  Flush(scratch_, to);
  const uint64_t sid = next_sender_++;
  sender_ids_[sid] = key;
  s.id = sid;
  s.timer = Arm(TimerKind::kRmppSend, sid, s.rmpp->deadline());
  return absl::OkStatus();
}

void Agent::Flush(std::vector<Mad>& mads, const MadAddress& to) {
  for (const Mad& m : mads) out_.push_back(OutgoingMad{to, m});
  mads.clear();
}

bool Agent::Cancel(TimePoint now, RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  ++counters_.cancelled;
  Request& r = it->second;
  wheel_.Cancel(r.timer);
  wheel_.Cancel(r.rmpp_timer);
  const uint64_t dest = r.dest;
  const bool started = r.started;
  const bool in_window = r.in_window;
  by_match_.erase(MatchKey(r.mgmt_class, r.tid_low));
  requests_.erase(it);
  auto d = destinations_.find(dest);
  if (d == destinations_.end()) return true;  // retried beside the window
  if (!started) {
    d->second.waiting.erase(std::find(d->second.waiting.begin(), d->second.waiting.end(), id));
  } else if (in_window) {
    std::erase(d->second.slots, id);
  }
  StartWaiting(dest, now);
  return true;
}

void Agent::StartWaiting(uint64_t dest, TimePoint now) {
  auto it = destinations_.find(dest);
  if (it == destinations_.end()) return;
  Destination& d = it->second;
  const size_t window = std::max<size_t>(config_.window, 1);
  if (d.waiting.size() > window - std::min(window, d.slots.size())) {
    // Full: requests unanswered for longer than answers take are presumed
    // lost and give their slots up (their timers still retransmit them).
    std::erase_if(d.slots, [&](RequestId held) {
      Request& h = requests_.at(held);
      if (!LostByLaterAnswer(h, now)) return false;
      h.in_window = false;
      ++counters_.slots_released;
      return true;
    });
  }
  while (!d.waiting.empty() && d.slots.size() < window) {
    const RequestId id = d.waiting.front();
    d.waiting.pop_front();
    Request& r = requests_.at(id);
    r.started = true;
    r.in_window = true;
    r.first_sent = now;
    d.slots.push_back(id);
    Transmit(r, now);
  }
  if (d.slots.empty() && d.waiting.empty()) destinations_.erase(it);
}

void Agent::Finish(TimePoint now, RequestId id, absl::Status status, const MadAddress& from,
                   std::vector<uint8_t> response) {
  auto it = requests_.find(id);
  Request& r = it->second;
  wheel_.Cancel(r.timer);
  wheel_.Cancel(r.rmpp_timer);
  Completion c;
  c.id = id;
  c.cookie = r.cookie;
  c.status = std::move(status);
  c.from = from;
  c.response = std::move(response);
  c.retries = r.retries;
  if (c.status.ok()) ++counters_.completed;
  const uint64_t dest = r.dest;
  const bool in_window = r.in_window;
  CompletionSink* sink = r.sink;
  by_match_.erase(MatchKey(r.mgmt_class, r.tid_low));
  requests_.erase(it);
  if (in_window) {
    std::erase(destinations_[dest].slots, id);
    StartWaiting(dest, now);
  }
  if (sink != nullptr) {
    sink->OnCompletion(now, std::move(c));
  } else {
    completions_.push_back(std::move(c));
  }
}

void Agent::RegisterHandler(uint8_t mgmt_class, uint16_t attribute_id, MadHandler* handler) {
  handlers_[uint32_t{mgmt_class} << 16 | attribute_id] = handler;
}

void Agent::UnregisterHandler(uint8_t mgmt_class, uint16_t attribute_id) {
  handlers_.erase(uint32_t{mgmt_class} << 16 | attribute_id);
}

void Agent::OnReceive(TimePoint now, const ReceivedMad& mad) {
  ++counters_.received;
  const size_t min_size = config_.rmpp_reassembly ? kMadSize : wire::kMadHeaderBytes;
  if (mad.data.size() < min_size) {
    ++counters_.malformed;
    return;
  }
  auto header = wire::MadHeader::Parse(mad.data);
  if (!header.ok()) {
    ++counters_.malformed;
    return;
  }
  const uint64_t tid = header->transaction_id;
  if (config_.rmpp_reassembly && UsesRmpp(header->mgmt_class)) {
    const wire::RmppHeader rmpp =
        wire::RmppHeader::Read(wire::FieldView::Unchecked(mad.data.data() + wire::kRmppHeaderOffset));
    if (rmpp.active) {
      const wire::RmppType type = rmpp.type;
      if (type != wire::RmppType::kData && OnRmppControl(now, mad, tid, rmpp)) return;
      if (IsResponse(header->method)) {
        Request* r = Match(mad, *header);
        if (r != nullptr && r->started) {
          OnRmppResponse(now, *r, mad, rmpp);
          return;
        }
        auto l = linger_by_match_.find(MatchKey(header->mgmt_class, tid & 0xFFFFFFFF));
        if (l != linger_by_match_.end()) {
          Lingering& done = lingering_.at(l->second);
          done.rmpp->OnSegment(now, mad.data, rmpp, &scratch_);
          Flush(scratch_, ReplyTo(mad.from));
          return;
        }
        ++counters_.unmatched;
        return;
      }
      if (type != wire::RmppType::kData) {
        ++counters_.unmatched;  // control for a transfer we do not run
        return;
      }
    }
  }
  if (IsResponse(header->method)) {
    OnResponse(now, mad, *header);
  } else {
    Dispatch(now, mad, header->mgmt_class, header->attribute_id);
  }
}

Agent::Request* Agent::Match(const ReceivedMad& mad, const wire::MadHeader& h) {
  auto it = by_match_.find(MatchKey(h.mgmt_class, h.transaction_id & 0xFFFFFFFF));
  if (it == by_match_.end()) return nullptr;
  Request& r = requests_.at(it->second);
  if (r.attribute_id != h.attribute_id || !MethodAnswers(r.method, h.method)) return nullptr;
  if (config_.check_source && !r.to.has_grh && r.to.lid != kPermissiveLid &&
      mad.from.lid != r.to.lid) {
    return nullptr;
  }
  return &r;
}

void Agent::OnResponse(TimePoint now, const ReceivedMad& mad, const wire::MadHeader& h) {
  Request* r = Match(mad, h);
  if (r == nullptr || !r->started || r->rmpp != nullptr) {
    ++counters_.unmatched;
    return;
  }
  if ((h.status & wire::kStatusBusy) != 0) {
    ++counters_.busy;
    if (r->retries < config_.max_retries) {
      ++r->retries;
      ++counters_.retries;
      r->busy_wait = true;
      ArmRequest(*r, now + AttemptTimeout(*r));
      return;
    }
    ++counters_.timeouts;
    Finish(now, r->id,
           absl::UnavailableError(absl::StrFormat(
               "%s %04x answered Busy to all %d attempts (LID %d)", MethodText(r->method),
               r->attribute_id, r->retries + 1, r->to.lid)),
           mad.from, {});
    return;
  }
  Sample(*r, now);
  Finish(now, r->id, absl::OkStatus(), mad.from,
         std::vector<uint8_t>(mad.data.begin(), mad.data.end()));
}

void Agent::Sample(const Request& r, TimePoint now) {
  // RACK's evidence: the answer proves what was sent up to its request's
  // first transmission arrived (the earliest it can answer).
  Responder& responder = ResponderFor(r.dest);
  if (responder.newest_answered < r.first_sent) responder.newest_answered = r.first_sent;
  // Karn's rule: an answer to a retransmitted request (or one that was
  // answered Busy) cannot be matched to one transmission.
  if (r.retries != 0) return;
  ++counters_.rtt_samples;
  responder.rto.AddSample(now - r.first_sent);
}

void Agent::OnRmppResponse(TimePoint now, Request& r, const ReceivedMad& mad,
                           const wire::RmppHeader& rmpp) {
  if (r.rmpp == nullptr) {
    Sample(r, now);  // the first segment answers the request
    r.rmpp = std::make_unique<RmppReceiver>(config_.rmpp, &counters_.rmpp, now);
    wheel_.Cancel(r.timer);
    r.rmpp_timer = Arm(TimerKind::kRmppRecv, r.id, r.rmpp->deadline());
  }
  r.rmpp->OnSegment(now, mad.data, rmpp, &scratch_);
  Flush(scratch_, ReplyTo(mad.from));
  switch (r.rmpp->state()) {
    case RmppReceiver::State::kReceiving:
      return;
    case RmppReceiver::State::kFailed:
      Finish(now, r.id, r.rmpp->error(), mad.from, {});
      return;
    case RmppReceiver::State::kDone: {
      std::vector<uint8_t> message = r.rmpp->TakeMessage();
      const uint64_t match = MatchKey(r.mgmt_class, r.tid_low);
      const uint64_t lid = next_linger_++;
      Lingering& l = lingering_[lid];
      l.rmpp = std::move(r.rmpp);
      l.match = match;
      l.timer = Arm(TimerKind::kLinger, lid, now + config_.rmpp.total_timeout);
      linger_by_match_[match] = lid;
      Finish(now, r.id, absl::OkStatus(), mad.from, std::move(message));
      return;
    }
  }
}

bool Agent::OnRmppControl(TimePoint now, const ReceivedMad& mad, uint64_t tid,
                          const wire::RmppHeader& rmpp) {
  auto it = senders_.find(SendKey{tid, mad.from.lid, mad.from.qpn});
  if (it == senders_.end()) return false;
  Sender& s = it->second;
  s.rmpp->OnControl(now, mad.data, rmpp, &scratch_);
  Flush(scratch_, s.rmpp->to());
  if (s.rmpp->state() != RmppSender::State::kSending) {
    wheel_.Cancel(s.timer);
    sender_ids_.erase(s.id);
    senders_.erase(it);
  } else {
    wheel_.Reschedule(s.timer, s.rmpp->deadline());
  }
  return true;
}

void Agent::Dispatch(TimePoint now, const ReceivedMad& mad, uint8_t mgmt_class,
                     uint16_t attribute_id) {
  auto it = handlers_.find(uint32_t{mgmt_class} << 16 | attribute_id);
  if (it == handlers_.end()) it = handlers_.find(uint32_t{mgmt_class} << 16 | kAnyAttribute);
  if (it == handlers_.end()) {
    ++counters_.dropped;
    return;
  }
  it->second->OnMad(now, mad);
}

void Agent::OnTimeout(TimePoint now) {
  struct Fired {
    TimerHandle handle;
    uint64_t payload;
  };
  std::vector<Fired> fired;
  wheel_.Advance(now, [&fired](TimerHandle h, uint64_t payload) {
    fired.push_back(Fired{h, payload});
  });
  for (const Fired& f : fired) {
    Expire(now, f.handle, static_cast<TimerKind>(f.payload >> 56),
           f.payload & ((uint64_t{1} << 56) - 1));
  }
}

void Agent::Expire(TimePoint now, TimerHandle handle, TimerKind kind, uint64_t id) {
  switch (kind) {
    case TimerKind::kRequest: {
      auto it = requests_.find(id);
      if (it == requests_.end() || !(it->second.timer == handle)) return;
      Request& r = it->second;
      if (r.deadline.has_value() && now >= *r.deadline) {
        const uint64_t dest = r.dest;
        if (!r.started) {  // still waiting for the window
          auto d = destinations_.find(dest);
          if (d != destinations_.end()) std::erase(d->second.waiting, id);
        }
        ++counters_.timeouts;
        Finish(now, id,
               absl::DeadlineExceededError(absl::StrFormat(
                   "no response to %s attribute 0x%04x (class 0x%02x, TID low 0x%08x) from "
                   "LID %d by the request's deadline (%d attempts)",
                   MethodText(r.method), r.attribute_id, r.mgmt_class, r.tid_low, r.to.lid,
                   r.started ? r.retries + 1 : 0)),
               r.to, {});
        StartWaiting(dest, now);  // forgets an empty destination
        return;
      }
      if (r.busy_wait) {
        r.busy_wait = false;
        Transmit(r, now);
        return;
      }
      if (r.retries < config_.max_retries) {
        ++r.retries;
        ++counters_.retries;
        if (r.in_window) ++counters_.slots_released;
        Transmit(r, now);
        Release(r, now);  // may start waiting ones (no insert: `r` stays valid)
        return;
      }
      ++counters_.timeouts;
      Finish(now, id,
             absl::DeadlineExceededError(absl::StrFormat(
                 "no response to %s attribute 0x%04x (class 0x%02x, TID low 0x%08x) from "
                 "LID %d after %d attempts",
                 MethodText(r.method), r.attribute_id, r.mgmt_class, r.tid_low, r.to.lid,
                 r.retries + 1)),
             r.to, {});
      return;
    }
    case TimerKind::kRmppRecv: {
      auto it = requests_.find(id);
      if (it == requests_.end() || it->second.rmpp == nullptr ||
          !(it->second.rmpp_timer == handle)) {
        return;
      }
      Request& r = it->second;
      r.rmpp->OnTimeout(now, &scratch_);
      Flush(scratch_, ReplyTo(r.to));
      ++counters_.timeouts;
      Finish(now, id, r.rmpp->error(), r.to, {});
      return;
    }
    case TimerKind::kRmppSend: {
      auto key = sender_ids_.find(id);
      if (key == sender_ids_.end()) return;
      auto it = senders_.find(key->second);
      if (it == senders_.end() || !(it->second.timer == handle)) {
        sender_ids_.erase(key);
        return;
      }
      Sender& s = it->second;
      s.rmpp->OnTimeout(now, &scratch_);
      Flush(scratch_, s.rmpp->to());
      if (s.rmpp->state() != RmppSender::State::kSending) {
        senders_.erase(it);
        sender_ids_.erase(key);
      } else {
        s.timer = Arm(TimerKind::kRmppSend, id, s.rmpp->deadline());
      }
      return;
    }
    case TimerKind::kCaller: {
      auto it = caller_timers_.find(id);
      if (it == caller_timers_.end() || !(it->second.timer == handle)) return;
      const CallerTimer t = it->second;
      caller_timers_.erase(it);
      t.sink->OnTimer(now, t.cookie);
      return;
    }
    case TimerKind::kLinger: {
      auto it = lingering_.find(id);
      if (it == lingering_.end()) return;
      auto m = linger_by_match_.find(it->second.match);
      if (m != linger_by_match_.end() && m->second == id) linger_by_match_.erase(m);
      lingering_.erase(it);
      return;
    }
  }
}

absl::optional<OutgoingMad> Agent::PollTransmit() {
  if (out_.empty()) return absl::nullopt;
  OutgoingMad o = out_.front();
  out_.pop_front();
  ++counters_.sent;
  return o;
}

absl::optional<Completion> Agent::PollCompletion() {
  if (completions_.empty()) return absl::nullopt;
  Completion c = std::move(completions_.front());
  completions_.pop_front();
  return c;
}

bool Agent::idle() const {
  return requests_.empty() && senders_.empty() && out_.empty() && completions_.empty() &&
         caller_timers_.empty();
}

void Agent::PrefetchForWake() const {
  const char* self = reinterpret_cast<const char*>(this);
  for (size_t i = 0; i < sizeof(*this); i += 64) __builtin_prefetch(self + i);
}

}  // namespace uscm::mad
