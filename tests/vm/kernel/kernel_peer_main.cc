// kernel_peer: uscm against the Linux kernel CM (see kernel_peer.h).
//
//   kernel_peer --mode=rping-client    --ip=B --peer=A [--port=7174] [--count=3] [--size=64]
//   kernel_peer --mode=rping-server    --ip=B [--port=7174]
//   kernel_peer --mode=ucmatose-client --ip=B --peer=A [--port=7471] [--count=10] [--size=100]
//   kernel_peer --mode=ucmatose-server --ip=B [--port=7471] [--count=10] [--size=100]
//   kernel_peer --mode=reject          --ip=B [--port=P] --data=TEXT
//   kernel_peer --mode=expect-reject   --ip=B --peer=A [--port=P] --data=TEXT
//
// Prints one line per step; the last line is "OK <mode>: ..." and the exit
// status is 0, or "FAIL <mode>: <why>" and 1.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/vm/kernel/kernel_peer.h"

ABSL_FLAG(std::string, mode, "", "rping-client|rping-server|ucmatose-client|ucmatose-server|"
                                 "reject|expect-reject");
ABSL_FLAG(std::string, ca, "rxe0", "RDMA device");
ABSL_FLAG(std::string, ip, "", "this VM's IPv4 address (on the RoCE netdev)");
ABSL_FLAG(std::string, peer, "", "the kernel peer's IPv4 address (client modes)");
ABSL_FLAG(int, port, 0, "rdma_cm TCP port (default: 7174 rping, 7471 ucmatose, 7500 reject)");
ABSL_FLAG(int, count, -1, "pings (rping, default 3) or messages (ucmatose, default 10)");
ABSL_FLAG(int, size, -1, "ping size (rping, default 64) or message size (ucmatose, 100)");
ABSL_FLAG(std::string, data, "", "reject modes: REJ private data (text)");
ABSL_FLAG(int, timeout_s, 60, "limit for each step");

namespace uscm::vmtest {
namespace {

constexpr uint32_t kAdvBytes = 16;  // struct rping_rdma_info: be64 buf, be32 rkey, be32 size

void PutBe(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
uint64_t GetBe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

void Advertise(RcBuffer& msg, const RcBuffer& target, uint32_t size) {
  PutBe(msg.bytes.data(), target.addr(), 8);
  PutBe(msg.bytes.data() + 8, target.mr->rkey, 4);
  PutBe(msg.bytes.data() + 12, size, 4);
}

ConnParam RcParam() {
  ConnParam p;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

#define RETURN_IF_ERROR(expr)           \
  do {                                  \
    absl::Status s_ = (expr);           \
    if (!s_.ok()) return s_;            \
  } while (0)
#define ASSIGN_OR_RETURN(lhs, expr)     \
  auto lhs##_or = (expr);               \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

absl::Status ExpectEstablished(const CmEvent& e) {
  if (e.type == EventType::kEstablished) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("connect: expected ESTABLISHED, got ", Describe(e)));
}

// rping's client loop (rping_test_client) against `rping -s`.
absl::StatusOr<std::string> RpingClient(Peer& p, const Address& dst, int count, uint32_t size) {
  RcVerbs& rc = p.rc();
  ASSIGN_OR_RETURN(start, rc.Register(size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                                IBV_ACCESS_REMOTE_WRITE));
  ASSIGN_OR_RETURN(sink, rc.Register(size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                               IBV_ACCESS_REMOTE_WRITE));
  ASSIGN_OR_RETURN(msg, rc.Register(kAdvBytes, 0));
  ASSIGN_OR_RETURN(est, p.Connect(dst, RcParam(), 2, kAdvBytes));
  RETURN_IF_ERROR(ExpectEstablished(est));
  std::printf("connected to %s (rping -s)\n", dst.ToString().c_str());
  unsigned char first = 'A';
  for (int ping = 0; ping < count; ++ping) {
    const std::string head = absl::StrFormat("rdma-ping-%d: ", ping);
    std::fill(sink->bytes.begin(), sink->bytes.end(), 0);
    unsigned char c = first;
    for (uint32_t i = 0; i < size; ++i) {
      if (i < head.size()) {
        start->bytes[i] = static_cast<uint8_t>(head[i]);
        continue;
      }
      start->bytes[i] = c;
      if (++c > 'z') c = 'A';
    }
    if (++first > 'z') first = 'A';
    start->bytes[size - 1] = 0;
    // Source advertisement; the server RDMA-reads it and answers.
    Advertise(*msg, *start, size);
    RETURN_IF_ERROR(rc.PostSend(*msg, kAdvBytes, 100));
    ASSIGN_OR_RETURN(go1, p.NextCompletion("rping: wait for go-ahead after read", IBV_WC_RECV));
    if (go1.byte_len != kAdvBytes) {
      return absl::DataLossError(absl::StrCat("rping: go-ahead is ", go1.byte_len,
                                              " bytes, expected 16"));
    }
    RETURN_IF_ERROR(rc.PostRecv(p.recv_buf(), kAdvBytes, 1));
    // Sink advertisement; the server RDMA-writes the data back and answers.
    Advertise(*msg, *sink, size);
    RETURN_IF_ERROR(rc.PostSend(*msg, kAdvBytes, 101));
    ASSIGN_OR_RETURN(go2, p.NextCompletion("rping: wait for go-ahead after write", IBV_WC_RECV));
    (void)go2;
    RETURN_IF_ERROR(rc.PostRecv(p.recv_buf(), kAdvBytes, 2));
    if (start->bytes != sink->bytes) {
      return absl::DataLossError(absl::StrCat("rping: ping ", ping,
                                              ": data written back differs from data read"));
    }
    std::printf("ping data: %s\n", reinterpret_cast<const char*>(sink->bytes.data()));
  }
  RETURN_IF_ERROR(p.DisconnectAndWait());
  return absl::StrCat(count, " pings of ", size, " bytes checked byte for byte; uscm "
                      "disconnected (DREQ answered)");
}

// rping's server loop (rping_test_server) for `rping -c`, until the client
// disconnects.
absl::StatusOr<std::string> RpingServer(Peer& p, const Address& local) {
  RcVerbs& rc = p.rc();
  constexpr uint32_t kMax = 65536;  // RPING_BUFSIZE
  ASSIGN_OR_RETURN(data, rc.Register(kMax, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                               IBV_ACCESS_REMOTE_WRITE));
  ASSIGN_OR_RETURN(msg, rc.Register(kAdvBytes, 0));
  ASSIGN_OR_RETURN(req, p.ListenForOne(local));
  std::printf("CONNECT_REQUEST\n");
  RETURN_IF_ERROR(p.Accept(req, RcParam(), 2, kAdvBytes));
  std::printf("ESTABLISHED\n");
  int pings = 0;
  for (;;) {
    CmEvent ev;
    auto adv = p.NextCompletion("rping: wait for source advertisement", IBV_WC_RECV, &ev);
    if (!adv.ok()) {
      if (adv.status().code() == absl::StatusCode::kAborted &&
          ev.type == EventType::kDisconnected && pings > 0) {
        RETURN_IF_ERROR(p.AnswerDisconnect());
        return absl::StrCat(pings, " pings served (RDMA read + write); client disconnected, "
                            "DREP sent");
      }
      return adv.status();
    }
    const uint8_t* m = p.recv_buf().bytes.data();
    uint64_t addr = GetBe(m, 8);
    uint32_t rkey = static_cast<uint32_t>(GetBe(m + 8, 4));
    uint32_t len = static_cast<uint32_t>(GetBe(m + 12, 4));
    if (adv->byte_len != kAdvBytes || len == 0 || len > kMax) {
      return absl::DataLossError(absl::StrCat("rping: bad advertisement (", adv->byte_len,
                                              " bytes, len ", len, ", limit ", kMax, ")"));
    }
    RETURN_IF_ERROR(rc.PostRecv(p.recv_buf(), kAdvBytes, 1));
    RETURN_IF_ERROR(rc.PostRdma(IBV_WR_RDMA_READ, *data, len, addr, rkey, 200));
    ASSIGN_OR_RETURN(rd, p.NextCompletion("rping: RDMA read", IBV_WC_RDMA_READ));
    (void)rd;
    data->bytes[len - 1] = 0;
    std::printf("server ping data: %s\n", reinterpret_cast<const char*>(data->bytes.data()));
    RETURN_IF_ERROR(rc.PostSend(*msg, kAdvBytes, 201));
    ASSIGN_OR_RETURN(adv2, p.NextCompletion("rping: wait for sink advertisement", IBV_WC_RECV));
    m = p.recv_buf().bytes.data();
    addr = GetBe(m, 8);
    rkey = static_cast<uint32_t>(GetBe(m + 8, 4));
    (void)adv2;
    RETURN_IF_ERROR(rc.PostRecv(p.recv_buf(), kAdvBytes, 2));
    const uint32_t wlen =
        static_cast<uint32_t>(strnlen(reinterpret_cast<const char*>(data->bytes.data()), len)) +
        1;
    RETURN_IF_ERROR(rc.PostRdma(IBV_WR_RDMA_WRITE, *data, wlen, addr, rkey, 202));
    ASSIGN_OR_RETURN(wr, p.NextCompletion("rping: RDMA write", IBV_WC_RDMA_WRITE));
    (void)wr;
    RETURN_IF_ERROR(rc.PostSend(*msg, kAdvBytes, 203));
    ++pings;
  }
}

absl::Status SendMessages(Peer& p, RcBuffer& buf, int count, uint32_t size) {
  for (int i = 0; i < count; ++i) {
    RETURN_IF_ERROR(p.rc().PostSend(buf, size, 300 + static_cast<uint64_t>(i)));
  }
  return absl::OkStatus();
}

absl::Status ReceiveMessages(Peer& p, int count, uint32_t size) {
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(wc, p.NextCompletion("ucmatose: receive", IBV_WC_RECV));
    if (wc.byte_len != size) {
      return absl::DataLossError(absl::StrCat("ucmatose: message ", i, " is ", wc.byte_len,
                                              " bytes, expected ", size));
    }
  }
  return absl::OkStatus();
}

// cmatose's client: receive N, send N, wait for the server's disconnect.
absl::StatusOr<std::string> UcmatoseClient(Peer& p, const Address& dst, int count,
                                           uint32_t size) {
  ASSIGN_OR_RETURN(out, p.rc().Register(size, 0));
  ASSIGN_OR_RETURN(est, p.Connect(dst, RcParam(), count, size));
  RETURN_IF_ERROR(ExpectEstablished(est));
  std::printf("connected to %s (ucmatose -s)\n", dst.ToString().c_str());
  RETURN_IF_ERROR(ReceiveMessages(p, count, size));
  RETURN_IF_ERROR(SendMessages(p, *out, count, size));
  CmEvent ev;
  auto more = p.NextCompletion("ucmatose: wait for the server's DREQ", IBV_WC_RECV, &ev);
  if (more.ok()) return absl::DataLossError("ucmatose: unexpected extra message");
  if (ev.type != EventType::kDisconnected) return more.status();
  // As cmatose's client, no wait for the sends' completions: the server
  // disconnects once it has every message, and its QP's move to ERROR can
  // take the ACK of the last one with it (docs/VM.md "Writing a group"); the
  // server's "test complete" is what shows they arrived.
  RETURN_IF_ERROR(p.AnswerDisconnect());
  return absl::StrCat(count, " x ", size, " bytes each way (", p.send_completions(), " of ",
                      count, " sends acknowledged at DISCONNECTED); server disconnected, "
                      "DREP sent");
}

// cmatose's server: send N, receive N, disconnect.
absl::StatusOr<std::string> UcmatoseServer(Peer& p, const Address& local, int count,
                                           uint32_t size) {
  ASSIGN_OR_RETURN(out, p.rc().Register(size, 0));
  ASSIGN_OR_RETURN(req, p.ListenForOne(local));
  std::printf("CONNECT_REQUEST\n");
  RETURN_IF_ERROR(p.Accept(req, RcParam(), count, size));
  std::printf("ESTABLISHED\n");
  RETURN_IF_ERROR(SendMessages(p, *out, count, size));
  RETURN_IF_ERROR(ReceiveMessages(p, count, size));
  RETURN_IF_ERROR(p.DisconnectAndWait());
  return absl::StrCat(count, " x ", size, " bytes each way; uscm disconnected (DREQ answered)");
}

absl::StatusOr<std::string> Reject(Peer& p, const Address& local, const std::string& data) {
  ASSIGN_OR_RETURN(req, p.ListenForOne(local));
  std::printf("CONNECT_REQUEST with %zu bytes of user private data\n", req.private_data.size());
  RETURN_IF_ERROR(req.id->Reject(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(data.data()), data.size())));
  // Reject() hands the REJ to umad before it returns.
  return absl::StrCat("rejected with \"", data, "\"");
}

absl::StatusOr<std::string> ExpectReject(Peer& p, const Address& dst, const std::string& data) {
  ASSIGN_OR_RETURN(e, p.Connect(dst, RcParam(), 0, 0));
  if (e.type != EventType::kRejected) {
    return absl::UnavailableError(absl::StrCat("expected REJECTED, got ", Describe(e)));
  }
  const std::string got(e.private_data.begin(), e.private_data.end());
  std::printf("REJECTED status %d, %zu bytes of private data\n", e.status, got.size());
  if (got.compare(0, data.size(), data) != 0) {
    return absl::DataLossError(absl::StrCat("REJ private data starts with \"",
                                            got.substr(0, data.size()), "\", expected \"", data,
                                            "\""));
  }
  if (e.status != 28) {
    return absl::DataLossError(absl::StrCat("REJ reason ", e.status,
                                            ", expected 28 (consumer reject)"));
  }
  return absl::StrCat("REJ 28 with \"", data, "\" received");
}

absl::StatusOr<std::string> Run() {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  absl::StatusOr<Address> ip = Address::Parse(absl::GetFlag(FLAGS_ip));
  if (!ip.ok()) return absl::InvalidArgumentError(absl::StrCat("--ip: ", ip.status().message()));
  const bool rping = mode.rfind("rping", 0) == 0;
  const bool ucmatose = mode.rfind("ucmatose", 0) == 0;
  int port = absl::GetFlag(FLAGS_port);
  if (port == 0) port = rping ? 7174 : ucmatose ? 7471 : 7500;
  int count = absl::GetFlag(FLAGS_count);
  if (count < 0) count = rping ? 3 : 10;
  int size = absl::GetFlag(FLAGS_size);
  if (size < 0) size = rping ? 64 : 100;
  if (size < 16 || size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("--size ", size, " outside 16..4096"));
  }
  if (count < 1 || count > 16) {
    return absl::InvalidArgumentError(absl::StrCat("--count ", count, " outside 1..16"));
  }
  PeerOptions o;
  o.ca_name = absl::GetFlag(FLAGS_ca);
  o.local_ip = *ip;
  o.local_ip.port = 0;
  o.step_timeout = mad::Duration::Seconds(absl::GetFlag(FLAGS_timeout_s));
  ASSIGN_OR_RETURN(peer, Peer::Open(o));
  std::printf("uscm on %s port %d, GID %s\n", o.ca_name.c_str(), o.port_num,
              peer->port().gid.ToString().c_str());
  Address local = *ip;
  local.port = static_cast<uint16_t>(port);
  Address dst;
  if (mode.find("client") != std::string::npos || mode == "expect-reject") {
    absl::StatusOr<Address> d = Address::Parse(absl::GetFlag(FLAGS_peer));
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--peer: ", d.status().message()));
    dst = *d;
    dst.port = static_cast<uint16_t>(port);
  }
  const uint32_t usize = static_cast<uint32_t>(size);
  const std::string data = absl::GetFlag(FLAGS_data);
  absl::StatusOr<std::string> r;
  if (mode == "rping-client") {
    r = RpingClient(*peer, dst, count, usize);
  } else if (mode == "rping-server") {
    r = RpingServer(*peer, local);
  } else if (mode == "ucmatose-client") {
    r = UcmatoseClient(*peer, dst, count, usize);
  } else if (mode == "ucmatose-server") {
    r = UcmatoseServer(*peer, local, count, usize);
  } else if (mode == "reject" || mode == "expect-reject") {
    if (data.empty() || data.size() > kRejPrivateData) {
      return absl::InvalidArgumentError(absl::StrCat("--data is ", data.size(),
                                                     " bytes; a REJ carries 1..148"));
    }
    r = mode == "reject" ? Reject(*peer, local, data) : ExpectReject(*peer, dst, data);
  } else {
    r = absl::InvalidArgumentError(absl::StrCat("--mode \"", mode, "\" is not one of "
                                                "rping-client, rping-server, ucmatose-client, "
                                                "ucmatose-server, reject, expect-reject"));
  }
  std::printf("%s\n", peer->CountersLine().c_str());
  return r;
}

}  // namespace
}  // namespace uscm::vmtest

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::StatusOr<std::string> r = uscm::vmtest::Run();
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (!r.ok()) {
    std::printf("FAIL %s: %s\n", mode.c_str(), r.status().ToString().c_str());
    return 1;
  }
  std::printf("OK %s: %s\n", mode.c_str(), r->c_str());
  return 0;
}
