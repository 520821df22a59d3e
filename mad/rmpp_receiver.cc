#include "mad/rmpp_receiver.h"


#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::mad {
namespace {

using wire::RmppHeader;
using wire::RmppStatus;
using wire::RmppType;

absl::Status AbortError(absl::string_view who, RmppStatus status, absl::string_view what) {
  const char* name = wire::RmppStatusName(status);
  return absl::AbortedError(absl::StrFormat("RMPP transfer aborted by %s (status %d%s): %s",
                                            who, static_cast<int>(status),
                                            name ? absl::StrCat(" ", name) : "", what));
}

// `mad` holds at least 36 bytes.
void WriteRmpp(std::span<uint8_t> mad, const wire::RmppHeader& h) {
  // Every field we set fits its width, so Emit cannot fail here.
  (void)h.Emit(mad);
}

}  // namespace

Mad MakeRmppControl(std::span<const uint8_t> template_mad, bool flip_response_bit,
                    RmppType type, RmppStatus rmpp_status, uint32_t segment,
                    uint32_t new_window_last) {
  Mad m{};
  std::memcpy(m.data(), template_mad.data(), std::min(template_mad.size(), kSaHeadersBytes));
  if (flip_response_bit) m[3] ^= 0x80;
  RmppHeader h;
  h.version = wire::kRmppVersion;
  h.type = type;
  h.active = true;
  h.status = rmpp_status;
  h.segment_number = segment;
  h.payload_length = new_window_last;
  WriteRmpp(m, h);
  return m;
}

// ---------------------------------------------------------------- receiver

RmppReceiver::RmppReceiver(const RmppConfig& config, RmppCounters* counters, TimePoint now)
    : config_(config), counters_(counters), deadline_(now + config.total_timeout) {}

void RmppReceiver::Ack(std::span<const uint8_t> mad, std::vector<Mad>* out) {
  if (last_segment_ == 0 || last_ < last_segment_) {
    window_last_ = std::max(window_last_, last_ + config_.receive_window);
  }
  out->push_back(MakeRmppControl(mad, true, RmppType::kAck, RmppStatus::kNormal, last_, window_last_));
  ++counters_->acks_sent;
}

void RmppReceiver::Fail(std::span<const uint8_t> mad, RmppStatus abort_status, absl::Status why,
                        std::vector<Mad>* out) {
  out->push_back(MakeRmppControl(mad, true, RmppType::kAbort, abort_status, 0, 0));
  ++counters_->aborts_sent;
  ++counters_->transfers_failed;
  state_ = State::kFailed;
  error_ = std::move(why);
  data_.clear();
  received_.clear();
}

void RmppReceiver::OnSegment(TimePoint now, std::span<const uint8_t> mad,
                             const RmppHeader& rmpp, std::vector<Mad>* out) {
  if (state_ == State::kFailed) return;
  const RmppType type = rmpp.type;
  if (type == RmppType::kAbort || type == RmppType::kStop) {
    if (state_ == State::kDone) return;
    ++counters_->aborts_received;
    ++counters_->transfers_failed;
    state_ = State::kFailed;
    error_ = AbortError("sender", rmpp.status,
                        type == RmppType::kStop ? "STOP" : "ABORT");
    return;
  }
  if (!have_first_ && last_ == 0 && received_.empty()) {
    std::memcpy(template_.data(), mad.data(), kSaHeadersBytes);
  }
  if (state_ == State::kDone) {
    // Our final ACK was lost: the sender repeats a segment. Answer it again.
    ++counters_->duplicates;
    Ack(template_, out);
    return;
  }
  if (rmpp.version != 1) {
    return Fail(mad, RmppStatus::kUnsupportedVersion,
                AbortError("receiver", RmppStatus::kUnsupportedVersion,
                           absl::StrFormat("RMPPVersion = %d; only 1 is supported",
                                           rmpp.version)),
                out);
  }
  if (type != RmppType::kData) {
    return Fail(mad, RmppStatus::kBadRmppType,
                AbortError("receiver", RmppStatus::kBadRmppType,
                           absl::StrFormat("RMPPType = %d where DATA (1) was expected",
                                           static_cast<int>(rmpp.type))),
                out);
  }
  const uint32_t seg = rmpp.segment_number;
  const bool first_flag = rmpp.first;
  if (seg == 0 || first_flag != (seg == 1)) {
    return Fail(mad, RmppStatus::kInconsistentFirstAndSegmentNumber,
                AbortError("receiver", RmppStatus::kInconsistentFirstAndSegmentNumber,
                           absl::StrFormat("SegmentNumber = %d with First flag %d", seg,
                                           first_flag)),
                out);
  }
  if (seg > config_.max_segments) {
    return Fail(mad, RmppStatus::kSegmentNumberTooBig,
                AbortError("receiver", RmppStatus::kSegmentNumberTooBig,
                           absl::StrFormat("SegmentNumber = %d; at most %d segments accepted",
                                           seg, config_.max_segments)),
                out);
  }
  ++counters_->segments_received;
  if (seg <= last_) {
    ++counters_->duplicates;
    Ack(mad, out);
    return;
  }
  if (seg > window_last_) {
    ++counters_->out_of_window;
    return;
  }
  if (last_segment_ != 0 && seg > last_segment_) {
    return Fail(mad, RmppStatus::kInconsistentLastAndPayloadLength,
                AbortError("receiver", RmppStatus::kInconsistentLastAndPayloadLength,
                           absl::StrFormat("segment %d follows the Last segment %d", seg,
                                           last_segment_)),
                out);
  }
  if (received_.size() < seg) {
    received_.resize(seg, false);
    data_.resize(size_t{seg} * kRmppSegmentData, 0);
  }
  if (received_[seg - 1]) {
    ++counters_->duplicates;
    return;
  }
  if (rmpp.last) {
    if (rmpp.payload_length < kRmppSegmentPayload - kRmppSegmentData ||
        rmpp.payload_length > kRmppSegmentPayload) {
      return Fail(mad, RmppStatus::kInconsistentLastAndPayloadLength,
                  AbortError("receiver", RmppStatus::kInconsistentLastAndPayloadLength,
                             absl::StrFormat("Last segment PayloadLength = %d; must be 20..220",
                                             rmpp.payload_length)),
                  out);
    }
    last_segment_ = seg;
    last_payload_ = rmpp.payload_length;
  }
  if (seg == 1) {
    std::memcpy(first_header_.data(), mad.data(), kSaHeadersBytes);
    have_first_ = true;
    total_payload_ = rmpp.payload_length;
  }
  if (have_first_ && last_segment_ != 0 && total_payload_ != 0 &&
      total_payload_ != (last_segment_ - 1) * kRmppSegmentPayload + last_payload_) {
    return Fail(mad, RmppStatus::kInconsistentLastAndPayloadLength,
                AbortError("receiver", RmppStatus::kInconsistentLastAndPayloadLength,
                           absl::StrFormat("first PayloadLength = %d but the Last segment %d "
                                           "carries %d",
                                           total_payload_, last_segment_, last_payload_)),
                out);
  }
  if (seg != last_ + 1) ++counters_->out_of_order;
  received_[seg - 1] = true;
  std::memcpy(&data_[size_t{seg - 1} * kRmppSegmentData], &mad[kSaHeadersBytes],
              kRmppSegmentData);
  const uint32_t before = last_;
  while (last_ < received_.size() && received_[last_]) ++last_;
  const bool complete = last_segment_ != 0 && last_ == last_segment_;
  if (complete) Finish();
  if (last_ > before && (before == 0 || last_ >= window_last_ || complete)) Ack(mad, out);
  (void)now;
}

void RmppReceiver::Finish() {
  const size_t length =
      size_t{last_segment_ - 1} * kRmppSegmentData + (last_payload_ - 20);
  message_.assign(first_header_.begin(), first_header_.begin() + kSaHeadersBytes);
  message_.insert(message_.end(), data_.begin(), data_.begin() + length);
  data_.clear();
  received_.clear();
  state_ = State::kDone;
  ++counters_->transfers_completed;
}

void RmppReceiver::OnTimeout(TimePoint now, std::vector<Mad>* out) {
  if (state_ != State::kReceiving || now < deadline_) return;
  Fail(template_, RmppStatus::kTotalTimeTooLong,
       absl::DeadlineExceededError(absl::StrFormat(
           "RMPP transfer incomplete after %s: %d segments in order%s",
           config_.total_timeout.ToString(), last_,
           last_segment_ ? absl::StrFormat(" of %d", last_segment_) : "")),
       out);
}

// ---------------------------------------------------------------- sender

RmppSender::RmppSender(const RmppConfig& config, RmppCounters* counters, MadAddress to,
                       std::span<const uint8_t> header, std::span<const uint8_t> payload)
    : config_(config), counters_(counters), to_(to), payload_(payload.begin(), payload.end()) {
  std::memcpy(header_.data(), header.data(), std::min(header.size(), kSaHeadersBytes));
  segments_ = std::max<uint32_t>(
      1, static_cast<uint32_t>((payload_.size() + kRmppSegmentData - 1) / kRmppSegmentData));
}

Mad RmppSender::Segment(uint32_t n) const {
  Mad m{};
  std::memcpy(m.data(), header_.data(), kSaHeadersBytes);
  const size_t pad = size_t{segments_} * kRmppSegmentData - payload_.size();
  RmppHeader f;
  f.version = wire::kRmppVersion;
  f.type = RmppType::kData;
  f.resp_time = wire::kRmppNoRespTime;
  f.active = true;
  f.first = n == 1;
  f.last = n == segments_;
  f.segment_number = n;
  if (n == 1) {
    f.payload_length = static_cast<uint32_t>(size_t{segments_} * kRmppSegmentPayload - pad);
  } else if (n == segments_) {
    f.payload_length = static_cast<uint32_t>(kRmppSegmentPayload - pad);
  }
  WriteRmpp(m, f);
  const size_t begin = size_t{n - 1} * kRmppSegmentData;
  const size_t len = std::min(kRmppSegmentData, payload_.size() - std::min(begin, payload_.size()));
  if (len > 0) std::memcpy(&m[kSaHeadersBytes], &payload_[begin], len);
  return m;
}

void RmppSender::SendUpTo(TimePoint now, uint32_t from, std::vector<Mad>* out) {
  const uint32_t to = std::min(window_last_, segments_);
  for (uint32_t n = from; n <= to; ++n) {
    out->push_back(Segment(n));
    ++counters_->segments_sent;
  }
  sent_ = std::max(sent_, to);
  deadline_ = now + config_.ack_timeout;
}

void RmppSender::Start(TimePoint now, std::vector<Mad>* out) { SendUpTo(now, 1, out); }

void RmppSender::Abort(RmppStatus status, absl::Status why, std::vector<Mad>* out) {
  out->push_back(MakeRmppControl(Segment(1), false, RmppType::kAbort, status, 0, 0));
  ++counters_->aborts_sent;
  ++counters_->transfers_failed;
  state_ = State::kFailed;
  error_ = std::move(why);
  deadline_ = TimePoint::Infinite();
}

void RmppSender::OnControl(TimePoint now, std::span<const uint8_t> mad,
                           const RmppHeader& rmpp, std::vector<Mad>* out) {
  if (state_ != State::kSending) return;
  const RmppType type = rmpp.type;
  if (type == RmppType::kAbort || type == RmppType::kStop) {
    ++counters_->aborts_received;
    ++counters_->transfers_failed;
    state_ = State::kFailed;
    error_ = AbortError("receiver", rmpp.status, type == RmppType::kStop ? "STOP" : "ABORT");
    deadline_ = TimePoint::Infinite();
    return;
  }
  if (type != RmppType::kAck) {
    return Abort(RmppStatus::kBadRmppType,
                 AbortError("sender", RmppStatus::kBadRmppType,
                            absl::StrFormat("RMPPType = %d where ACK (2) was expected",
                                            static_cast<int>(rmpp.type))),
                 out);
  }
  ++counters_->acks_received;
  if (rmpp.segment_number > sent_) {
    return Abort(RmppStatus::kSegmentNumberTooBig,
                 AbortError("sender", RmppStatus::kSegmentNumberTooBig,
                            absl::StrFormat("ACK of segment %d; only %d sent",
                                            rmpp.segment_number, sent_)),
                 out);
  }
  if (rmpp.payload_length < rmpp.segment_number) {
    return Abort(RmppStatus::kNewWindowLastTooSmall,
                 AbortError("sender", RmppStatus::kNewWindowLastTooSmall,
                            absl::StrFormat("NewWindowLast = %d below the ACKed segment %d",
                                            rmpp.payload_length, rmpp.segment_number)),
                 out);
  }
  if (rmpp.segment_number < acked_) return;  // stale
  const bool progress = rmpp.segment_number > acked_ || rmpp.payload_length > window_last_;
  acked_ = rmpp.segment_number;
  window_last_ = std::max(window_last_, rmpp.payload_length);
  if (acked_ == segments_) {
    state_ = State::kDone;
    deadline_ = TimePoint::Infinite();
    ++counters_->transfers_completed;
    return;
  }
  if (!progress) return;
  retries_ = 0;
  if (std::min(window_last_, segments_) > sent_) {
    SendUpTo(now, sent_ + 1, out);
  } else {
    deadline_ = now + config_.ack_timeout;
  }
}

void RmppSender::OnTimeout(TimePoint now, std::vector<Mad>* out) {
  if (state_ != State::kSending || now < deadline_) return;
  if (++retries_ > config_.max_send_retries) {
    return Abort(RmppStatus::kTooManyRetries,
                 AbortError("sender", RmppStatus::kTooManyRetries,
                            absl::StrFormat("no ACK after %d retransmissions; %d of %d "
                                            "segments acknowledged",
                                            config_.max_send_retries, acked_, segments_)),
                 out);
  }
  const size_t before = out->size();
  SendUpTo(now, acked_ + 1, out);
  counters_->retransmits += out->size() - before;
}

}  // namespace uscm::mad
