// uscm's side of the kernel-CM interop checks (tests/vm/groups/kernel_interop.sh).
//
// A Peer is one uscm rdma_cm Device on a RoCE port (umad on QP1, ib_cm not
// loaded), one event channel, and an RC QP with buffers. It speaks the data
// protocols of the kernel's test programs, so that they finish normally:
//   rping:    the client sends {addr, rkey, len} (16 bytes, big endian) of its
//             start buffer; the server RDMA-reads it and answers with a 16-byte
//             SEND; the client advertises its sink buffer the same way; the
//             server RDMA-writes the data there and sends again. Per ping.
//   ucmatose: the server sends N messages of S bytes, the client receives
//             them and sends N back, then the server disconnects.
// Every wait has a deadline; a failure names the step and what arrived.
#ifndef USCM_TESTS_VM_KERNEL_KERNEL_PEER_H_
#define USCM_TESTS_VM_KERNEL_KERNEL_PEER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/time.h"
#include "mad/umad_transport.h"
#include "tests/vm/kernel/rc_verbs.h"
#include "verbs/qp_transitions.h"
#include "verbs/roce_addressing.h"

namespace uscm::vmtest {

struct PeerOptions {
  std::string ca_name = "rxe0";
  int port_num = 1;
  Address local_ip;                         // this VM's address (port 0)
  mad::Duration step_timeout = mad::Duration::Seconds(30);
};

// One CM event, copied out of the channel (the channel's event is acked).
struct CmEvent {
  EventType type = EventType::kAddrResolved;
  int status = 0;
  CmId* id = nullptr;
  std::vector<uint8_t> private_data;
  std::string detail;
};
std::string Describe(const CmEvent& e);

class Peer {
 public:
  static absl::StatusOr<std::unique_ptr<Peer>> Open(const PeerOptions& options);
  ~Peer();

  // Active side: resolve (neighbour = the peer's IPv4-mapped GID), path
  // (IB_PATH: RoCE has no SA), RC QP attached, `post_recvs` receives of
  // `recv_size` bytes posted once the QP is in INIT, REQ; returns the event
  // that ended the attempt (ESTABLISHED, REJECTED, ...).
  absl::StatusOr<CmEvent> Connect(const Address& dst, const ConnParam& param,
                                  int post_recvs, uint32_t recv_size);
  // Passive side: bind + listen, wait for one CONNECT_REQUEST.
  absl::StatusOr<CmEvent> ListenForOne(const Address& local);
  // Accepts `req` with the RC QP attached (INIT and receives posted first),
  // then waits for ESTABLISHED.
  absl::Status Accept(const CmEvent& req, const ConnParam& param, int post_recvs,
                      uint32_t recv_size);

  // Next CM event; error if none within the step timeout.
  absl::StatusOr<CmEvent> NextCmEvent(const char* step);
  // Next completion of `opcode` (others of the same kind are skipped only if
  // `skip_sends`: send completions are counted and dropped). A CM event
  // arriving first is an error unless `cm_event_ok`; then it is returned
  // through `cm_event`.
  absl::StatusOr<ibv_wc> NextCompletion(const char* step, ibv_wc_opcode opcode,
                                        CmEvent* cm_event = nullptr);

  // Disconnects and waits for DISCONNECTED (our DREQ answered).
  absl::Status DisconnectAndWait();
  // After a DISCONNECTED from the peer: sends the DREP.
  absl::Status AnswerDisconnect();

  RcVerbs& rc() { return *rc_; }
  RcBuffer& recv_buf() { return *recv_buf_; }
  CmId* conn() const { return conn_; }
  uint64_t send_completions() const { return send_completions_; }
  uint64_t flushed() const { return flushed_; }
  // uscm's CM counters, one line: what the kernel sent that uscm dropped or
  // did not expect (malformed, unknown connection, unexpected state), and
  // duplicates / retransmissions.
  std::string CountersLine();
  const mad::LocalPort& port() const { return device_->port(); }

 private:
  Peer() = default;
  // Drains the channel and the CQ once; waits up to 2 ms when both were empty.
  absl::Status Pump();
  absl::Status AttachQp(CmId* id);

  PeerOptions options_;
  std::unique_ptr<mad::UmadTransport> umad_;
  std::unique_ptr<verbs::RoceAddressing> roce_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<EventChannel> channel_;
  std::unique_ptr<RcVerbs> rc_;
  std::unique_ptr<verbs::VerbsQp> vqp_;
  RcBuffer* recv_buf_ = nullptr;
  CmId* listener_ = nullptr;
  CmId* conn_ = nullptr;
  uint8_t gid_index_ = 0;
  mad::Gid gid_;
  std::deque<CmEvent> events_;
  std::deque<ibv_wc> completions_;
  uint64_t send_completions_ = 0;
  uint64_t flushed_ = 0;  // work requests flushed by the QP's move to ERROR
};

}  // namespace uscm::vmtest

#endif  // USCM_TESTS_VM_KERNEL_KERNEL_PEER_H_
