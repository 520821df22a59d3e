// RMPP (IBA Vol 1 13.6; digest §6.5) for SA GetTable transfers when the
// transport does not coalesce segments (simulated fabric, raw UD, umad without
// rmpp_version): one receiver and one sender state machine per transfer.
//
// Both are sans-IO: they take 256-byte MADs and `now`, write the MADs to send
// (ACK, ABORT, DATA) into a caller-owned vector, and report their next
// deadline. The agent (mad/agent.h) owns them, routes segments and ACKs to the
// right one, and arms the timer wheel with their deadlines.
#ifndef USCM_MAD_RMPP_RECEIVER_H_
#define USCM_MAD_RMPP_RECEIVER_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "mad/time.h"
#include "mad/transport.h"
#include "mad/wire/rmpp.h"

namespace uscm::mad {

using Mad = std::array<uint8_t, kMadSize>;

// Bytes of MAD + RMPP + SA headers repeated in every segment, and the data
// each segment carries (digest §6.5).
inline constexpr size_t kRmppMadHeaderBytes = 36;  // MAD header + RMPP header
inline constexpr size_t kSaHeadersBytes = 56;      // ... + SA header
inline constexpr size_t kRmppSegmentData = kMadSize - kSaHeadersBytes;  // 200
// PayloadLength counts the 20-byte SA header of every segment.
inline constexpr size_t kRmppSegmentPayload = kMadSize - kRmppMadHeaderBytes;  // 220

struct RmppConfig {
  uint32_t receive_window = 16;               // segments beyond the last in-order one
  Duration total_timeout = Duration::Seconds(40);  // receiver gives up (Linux)
  Duration ack_timeout = Duration::Seconds(2);     // sender retransmits after this
  int max_send_retries = 5;                        // sender: ABORT 126 after this
  uint32_t max_segments = 65536;                   // receiver refuses longer transfers
};

// Counters shared by every transfer of one agent.
struct RmppCounters {
  uint64_t segments_received = 0;
  uint64_t duplicates = 0;       // segments at or below the last in-order one
  uint64_t out_of_order = 0;     // held until the gap is filled
  uint64_t out_of_window = 0;    // dropped: beyond NewWindowLast
  uint64_t acks_sent = 0;
  uint64_t acks_received = 0;
  uint64_t aborts_sent = 0;
  uint64_t aborts_received = 0;  // ABORT or STOP from the peer
  uint64_t segments_sent = 0;
  uint64_t retransmits = 0;      // sender: segments sent again after an ACK timeout
  uint64_t transfers_completed = 0;
  uint64_t transfers_failed = 0;
};

// Builds an RMPP control MAD (ACK/ABORT/STOP) from `template_mad`: its 56
// header bytes (Linux format_ack copies the class header too), the response
// bit flipped when `flip_response_bit` (a receiver answering DATA), flags
// Active only, and the given type, status, SegmentNumber and NewWindowLast.
Mad MakeRmppControl(std::span<const uint8_t> template_mad, bool flip_response_bit,
                    wire::RmppType type, wire::RmppStatus rmpp_status, uint32_t segment,
                    uint32_t new_window_last);

// Reassembles one transfer. Created on the first segment seen (which need not
// be segment 1). Output on success: the first segment's 56 header bytes
// followed by the concatenated data, trimmed to the transfer's length — the
// same layout umad returns when the kernel coalesces.
class RmppReceiver {
 public:
  enum class State { kReceiving, kDone, kFailed };

  RmppReceiver(const RmppConfig& config, RmppCounters* counters, TimePoint now);

  // Feeds one DATA/ABORT/STOP MAD of this transfer (header already parsed into
  // `rmpp`). Appends ACK/ABORT MADs to `out`.
  void OnSegment(TimePoint now, std::span<const uint8_t> mad, const wire::RmppHeader& rmpp,
                 std::vector<Mad>* out);
  // Past the total timeout: fails the transfer and appends an ABORT (118).
  void OnTimeout(TimePoint now, std::vector<Mad>* out);

  State state() const { return state_; }
  TimePoint deadline() const { return deadline_; }
  // When kFailed: why (names the RMPP status).
  const absl::Status& error() const { return error_; }
  // When kDone: the coalesced message.
  std::vector<uint8_t> TakeMessage() { return std::move(message_); }
  uint32_t last_in_order() const { return last_; }

 private:
  void Fail(std::span<const uint8_t> mad, wire::RmppStatus abort_status, absl::Status why,
            std::vector<Mad>* out);
  void Ack(std::span<const uint8_t> mad, std::vector<Mad>* out);
  void Finish();

  Mad template_{};               // the first segment seen (for ACK / ABORT)
  const RmppConfig& config_;
  RmppCounters* counters_;
  TimePoint deadline_;
  State state_ = State::kReceiving;
  absl::Status error_;
  Mad first_header_{};           // segment 1 (for the coalesced header)
  bool have_first_ = false;
  uint32_t total_payload_ = 0;   // PayloadLength of segment 1 (0 = unknown)
  uint32_t last_ = 0;            // last in-order segment received
  uint32_t last_segment_ = 0;    // number of the segment flagged Last (0 = not seen)
  uint32_t last_payload_ = 0;    // its PayloadLength
  uint32_t window_last_ = 1;     // NewWindowLast we granted
  // Segment n's 200 data bytes at [(n - 1) * 200, n * 200); received[n - 1].
  std::vector<uint8_t> data_;
  std::vector<bool> received_;
  std::vector<uint8_t> message_;
};

// Sends one transfer: `header` (56 bytes: MAD + RMPP + SA header; the RMPP
// fields are filled here) plus `payload` (the records) split into segments.
// Window starts at 1 and grows with the receiver's NewWindowLast; an ACK
// timeout resends from the last acknowledged segment.
class RmppSender {
 public:
  enum class State { kSending, kDone, kFailed };

  RmppSender(const RmppConfig& config, RmppCounters* counters, MadAddress to,
             std::span<const uint8_t> header, std::span<const uint8_t> payload);

  // Emits the first window of segments.
  void Start(TimePoint now, std::vector<Mad>* out);
  // ACK / STOP / ABORT from the receiver.
  void OnControl(TimePoint now, std::span<const uint8_t> mad, const wire::RmppHeader& rmpp,
                 std::vector<Mad>* out);
  // The ACK timer fired: resend from the last acknowledged segment, or abort
  // (126) after max_send_retries.
  void OnTimeout(TimePoint now, std::vector<Mad>* out);

  State state() const { return state_; }
  TimePoint deadline() const { return deadline_; }
  const absl::Status& error() const { return error_; }
  const MadAddress& to() const { return to_; }
  uint32_t segments() const { return segments_; }

 private:
  Mad Segment(uint32_t n) const;
  void SendUpTo(TimePoint now, uint32_t from, std::vector<Mad>* out);
  void Abort(wire::RmppStatus status, absl::Status why, std::vector<Mad>* out);

  const RmppConfig& config_;
  RmppCounters* counters_;
  MadAddress to_;
  std::array<uint8_t, kSaHeadersBytes> header_{};
  std::vector<uint8_t> payload_;
  uint32_t segments_ = 1;
  uint32_t acked_ = 0;        // last segment the receiver acknowledged
  uint32_t window_last_ = 1;  // highest segment we may send
  uint32_t sent_ = 0;         // highest segment sent so far in this round
  int retries_ = 0;
  TimePoint deadline_ = TimePoint::Infinite();
  State state_ = State::kSending;
  absl::Status error_;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_RMPP_RECEIVER_H_
