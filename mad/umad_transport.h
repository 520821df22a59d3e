// The umad transport: MADs on QP1 through the kernel's ib_umad (libibumad).
//
// One port, two agents: CM (class 0x07 v2, receives unsolicited Sends) and SA
// (class 0x03 v2, client only, kernel RMPP when available). Every send goes out
// with timeout 0 and retries 0: retransmission is the protocol core's job.
//
// Things the kernel (or libibumad) does that callers must know:
//  - ib_umad overwrites TID bits 63..32 of every request with the agent's
//    hi_tid, so responses echo a TID whose upper half differs from the one
//    sent. Match on the lower 32 bits (caps().rewrites_tid_high). ibsim's
//    umad2sim overwrites bits 47..32 likewise.
//  - ib_umad refuses (EINVAL) a request whose TID and class equal one still
//    waiting for its send completion. Send() retries that for a short while
//    and then says so; a fresh TID per message avoids it.
//  - Under ibsim (LD_PRELOAD=libumad2sim.so) fd() is a fake descriptor that
//    only poll(2) understands (umad2sim intercepts poll, not epoll), there is
//    no kernel RMPP (multi-segment responses arrive as raw segments, and
//    umad2sim cuts each to 256 bytes), and a MAD for a class without an agent
//    crashes umad2sim's receive thread (NULL fd_data). A client started with
//    SIM_SET_ISSM=1 (needed to receive unsolicited CM MADs) advertises IsSM,
//    so OpenSM sends it SMInfo SMPs: on the simulator Open() therefore also
//    registers SMP agents (classes 0x01, 0x81) whose MADs Drain() drops.
//    umad2sim also keeps only 288 - umad_size() = 224 MAD bytes per packet
//    (its buffer is one 288-byte sim_request, and it reports a longer length
//    than it filled, so reading more would run past its heap buffer): on the
//    simulator Drain() reads 224 bytes and zero-fills bytes 224..255.
//    ibsim drops a MAD still queued when its sender disconnects (it serves
//    the control socket first): on the simulator the destructor waits for
//    an SA ClassPortInfo round trip (at most 500 ms) so that the last MADs a
//    process sends before it exits are delivered.
#ifndef USCM_MAD_UMAD_TRANSPORT_H_
#define USCM_MAD_UMAD_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/transport.h"

namespace uscm::mad {

struct UmadOptions {
  std::string ca_name;       // "" = the first CA with an active port
  int port_num = 0;          // 0 = the first active port of that CA
  // Register the CM agent with method mask {Send}, i.e. receive every
  // unsolicited CM MAD. Fails while the kernel's ib_cm is loaded. With false
  // the agent is registered with an empty mask: it can send CM MADs and
  // receive responses (TID-matched) but no REQ/REP/...
  bool receive_cm = true;
  bool register_sa = true;   // SA client agent (class 0x03 v2)
  enum class Rmpp : uint8_t {
    kAuto,    // kUser on a real port, falling back to kKernel on a kernel
              // without UMAD_USER_RMPP; kNone under ibsim (no RMPP there)
    kUser,    // umad_register2 + UMAD_USER_RMPP: every segment reaches us, our
              // agent (mad/rmpp_receiver) reassembles, ACKs and times out
    kKernel,  // rmpp_version 1: the kernel reassembles and ACKs SA responses
    kNone,    // rmpp_version 0: raw segments reach the caller
  };
  Rmpp rmpp = Rmpp::kAuto;
  bool require_active = true;  // fail if the chosen port is not ACTIVE
  // ibsim only: ibsim hands unsolicited QP1 MADs (every CM request) only to
  // a client flagged IsSM. This opens the port's issm device once the agents
  // are registered, which is how umad2sim sets that flag. SIM_SET_ISSM=1 does
  // the same at connect time, before any agent exists, and an SMInfo poll
  // from OpenSM arriving in that window crashes umad2sim. Never use this on a
  // node where OpenSM runs: ibsim would hand the SA's requests to us.
  bool sim_claim_issm = false;
};

// Counters; plain numbers, read whenever.
struct UmadStats {
  uint64_t sent = 0;
  uint64_t send_errors = 0;
  uint64_t send_tid_busy_retries = 0;  // EINVAL from is_duplicate(), retried
  uint64_t received = 0;
  uint64_t receive_status_errors = 0;  // umad status != 0 (e.g. RMPP timeout)
  uint64_t receive_buffer_grows = 0;   // ENOSPC: a coalesced RMPP response
  uint64_t dropped_smp = 0;            // SMPs absorbed on the simulator
  uint64_t answered_sminfo = 0;        // simulator: SMInfo Gets answered "not active"
  uint64_t sminfo_answer_bounces = 0;  // simulator: answers ibsim could not route (resent)
  uint64_t sim_tail_zeroed = 0;        // simulator MADs whose bytes 224..255 were lost
  uint64_t sim_rmpp_normalized = 0;    // simulator: unsegmented RMPP answers made one DATA segment
};

class UmadTransport final : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<UmadTransport>> Open(const UmadOptions& options);
  ~UmadTransport() override;
  UmadTransport(const UmadTransport&) = delete;
  UmadTransport& operator=(const UmadTransport&) = delete;

  absl::Status Send(const MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const ReceivedMad&)> sink, size_t max = SIZE_MAX) override;
  int fd() const override;
  const TransportCaps& caps() const override { return caps_; }
  const LocalPort& port() const override { return port_; }
  // Lost for good once a read of the umad file fails with EIO (the kernel's
  // ib_umad_read once the port's agents are dead: its device was removed,
  // or ib_umad unloaded; its poll then reports EPOLLERR for ever) or ENODEV.
  absl::Status link_status() const override { return lost_; }

  const UmadStats& stats() const { return stats_; }
  // The CM agent's id, and the SA agent's id (-1 if not registered).
  int cm_agent() const { return cm_agent_; }
  int sa_agent() const { return sa_agent_; }
  // How SA RMPP is done: "user", "kernel", "none", or "" without an SA agent.
  const std::string& sa_rmpp_mode() const { return sa_rmpp_mode_; }

 private:
  UmadTransport() = default;
  // Whether a failed umad_recv's errno means the port is gone (sets lost_).
  bool NoteReceiveLoss(int err);
  void NormalizeSimRmpp(uint8_t* mad, size_t received);  // ibsim: see the .cc
  void FlushSimulatorSends();                              // ibsim: see the .cc
  void AnswerSimulatorSmInfo(const uint8_t* smp, size_t length,
                             uint16_t from_lid);  // ibsim: see the .cc
  bool NoteBouncedSmInfoAnswer(const uint8_t* mad, size_t length);
  void ResendBouncedSmInfoAnswers();
  // ibsim: SMInfo answers sent lately, kept to be sent again if bounced.
  struct SimSmInfoAnswer {
    std::vector<uint8_t> umad;  // umad header + MAD, ready to send
    int agent = -1;
    bool bounced = false;
    int resends = 0;
    std::chrono::steady_clock::time_point resend_at;
  };

  int port_id_ = -1;
  int cm_agent_ = -1;
  int sa_agent_ = -1;
  int issm_fd_ = -1;
  bool sim_issm_claimed_ = false;
  std::string sa_rmpp_mode_;  // sim_claim_issm: answer OpenSM's SMInfo polls
  bool simulator_ = false;       // ibsim's umad2sim, detected by hca_type
  std::vector<int> smp_agents_;  // simulator only
  std::vector<SimSmInfoAnswer> sim_sminfo_answers_;  // simulator only, the last few
  int sim_sminfo_bounced_ = 0;  // of those, waiting to be sent again
  TransportCaps caps_;
  LocalPort port_;
  UmadStats stats_;
  absl::Status lost_;  // link_status
  std::vector<uint8_t> send_buf_;  // umad header + one MAD
  std::vector<uint8_t> recv_buf_;  // umad header + the largest MAD seen so far
};

// Reads the local port's attributes without opening it (no agent, no device
// file): for tools that wait until a port becomes ACTIVE. `state` follows
// PortInfo:PortState (1 Down, 2 Init, 3 Armed, 4 Active).
struct UmadPortState {
  LocalPort port;
  int state = 0;
  std::string ca_type;  // sysfs hca_type ("simulator" under ibsim)
};
absl::StatusOr<UmadPortState> QueryUmadPort(const std::string& ca_name, int port_num);

}  // namespace uscm::mad

#endif  // USCM_MAD_UMAD_TRANSPORT_H_
