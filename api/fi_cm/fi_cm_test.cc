// fi_cm semantics on the simulated fabric (two hosts, virtual time), and the
// runtime's QP driver hook with a recording QP: which transitions, with which
// attributes, at which point.
#include "api/fi_cm/fi_cm.h"

#include <netinet/in.h>

#include <cstring>
#include <memory>
#include <vector>

#include "api/rdma_cm/rdma_cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::fi {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint16_t kPort = 7471;

std::vector<uint8_t> Fill(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

// Records every call; optionally fails one state.
class RecordingQp : public QpTransitioner {
 public:
  explicit RecordingQp(uint32_t qpn) : qpn_(qpn) {}
  uint32_t qp_num() const override { return qpn_; }
  absl::Status Modify(const cm::QpAttributes& a) override {
    log.push_back(a.state == cm::QpState::kInit ? "INIT" : a.state == cm::QpState::kRtr ? "RTR" : "RTS");
    attrs.push_back(a);
    return absl::OkStatus();
  }
  absl::Status ToError() override {
    log.push_back("ERROR");
    return absl::OkStatus();
  }
  absl::Status AttachMulticast(const mad::Gid& mgid, uint16_t mlid) override {
    log.push_back("ATTACH");
    attached_mlid = mlid;
    return absl::OkStatus();
  }
  absl::Status DetachMulticast(const mad::Gid& mgid, uint16_t mlid) override {
    log.push_back("DETACH");
    return absl::OkStatus();
  }
  std::vector<std::string> log;
  std::vector<cm::QpAttributes> attrs;
  uint16_t attached_mlid = 0;

 private:
  uint32_t qpn_;
};

class FiCmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = testing::SimFabric::Create(11);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
    eq_[0] = *EventQueue::Create(*f_->host(0).device);
    eq_[1] = *EventQueue::Create(*f_->host(1).device);
  }

  // Runs virtual time until EQ `i` has an entry (or 120 s pass). Both EQs
  // are read meanwhile: the EQ is where fi_cm makes progress (manual progress).
  void Run(int i) {
    ASSERT_TRUE(f_->scheduler()
                    .RunUntil([&] { return (eq_[1 - i]->pending(), eq_[i]->pending() > 0); },
                              f_->scheduler().Now() + mad::Duration::Seconds(120))
                    .ok());
  }
  EqEntry Next(int i, EqEvent want) {
    Run(i);
    absl::StatusOr<EqEntry> e = eq_[i]->Read();
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return {};
    EXPECT_EQ(e->event, want) << EqEventName(e->event) << " vs " << EqEventName(want);
    return *e;
  }
  EqErrEntry NextErr(int i) {
    Run(i);
    EXPECT_EQ(ToFiErrno(eq_[i]->Read().status()), -kFiEavail);
    absl::StatusOr<EqErrEntry> e = eq_[i]->ReadErr();
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : EqErrEntry{};
  }
  std::unique_ptr<PassiveEndpoint> Listener(int backlog = 0) {
    auto pep = *PassiveEndpoint::Create(*eq_[1], PortSpace::kTcp, &pep_ctx_);
    Address a = f_->host(1).ip;
    a.port = kPort;
    std::vector<uint8_t> sa(sizeof(sockaddr_in));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(kPort);
    sin.sin_addr.s_addr = htonl(a.ipv4());
    std::memcpy(sa.data(), &sin, sizeof sin);
    EXPECT_TRUE(pep->SetName(sa.data(), sa.size()).ok());
    EXPECT_TRUE(pep->SetBacklog(backlog).ok());
    EXPECT_TRUE(pep->Listen().ok());
    return pep;
  }
  Address Dest() {
    Address d = f_->host(1).ip;
    d.port = kPort;
    return d;
  }
  void Settle() {
    for (int k = 0; k < 30; ++k) {
      f_->RunFor(mad::Duration::Seconds(1));
      eq_[0]->pending();
      eq_[1]->pending();
    }
  }

  std::unique_ptr<testing::SimFabric> f_;
  std::unique_ptr<EventQueue> eq_[2];
  int pep_ctx_ = 0;
};

TEST_F(FiCmTest, ConnectAcceptCarriesDataBothWays) {
  auto pep = Listener();
  int ctx = 0;
  auto ep = *Endpoint::Create(*eq_[0], PortSpace::kTcp, &ctx);
  EXPECT_EQ(ep->CmDataSize(), 56u);
  ASSERT_TRUE(ep->Connect(Dest(), Fill(56, 0xAB)).ok());
  EqEntry req = Next(1, EqEvent::kConnReq);
  EXPECT_EQ(req.fid, pep.get());
  EXPECT_EQ(req.context, &pep_ctx_);
  EXPECT_EQ(req.data, Fill(56, 0xAB));
  EXPECT_EQ(req.info.src_addr.ipv4(), f_->host(0).ip.ipv4());
  auto acc = *Endpoint::FromConnReq(*eq_[1], req.info);
  EXPECT_EQ(acc->CmDataSize(), 196u);
  EXPECT_EQ(Endpoint::FromConnReq(*eq_[1], req.info).status().code(),
            absl::StatusCode::kNotFound);  // the info is consumed
  ASSERT_TRUE(acc->Accept(std::vector<uint8_t>{7, 8, 9}).ok());
  EqEntry c0 = Next(0, EqEvent::kConnected);
  EXPECT_EQ(c0.fid, ep.get());
  EXPECT_EQ(c0.context, &ctx);
  ASSERT_EQ(c0.data.size(), 196u);  // the REP field, padding included
  EXPECT_EQ(c0.data[0], 7);
  EXPECT_EQ(c0.data[2], 9);
  EqEntry c1 = Next(1, EqEvent::kConnected);
  EXPECT_EQ(c1.fid, acc.get());
  EXPECT_TRUE(c1.data.empty());  // only the connecting side gets data
  EXPECT_TRUE(ep->connected());
  EXPECT_TRUE(acc->connected());
}

TEST_F(FiCmTest, RejectIsAnErrorEntryWithThePeersData) {
  auto pep = Listener();
  auto ep = *Endpoint::Create(*eq_[0]);
  ASSERT_TRUE(ep->Connect(Dest(), Fill(1, 1)).ok());
  EqEntry req = Next(1, EqEvent::kConnReq);
  EXPECT_THAT(pep->Reject(req.info, Fill(149, 1)).message(), HasSubstr("at most 148"));
  ASSERT_TRUE(pep->Reject(req.info, Fill(148, 0x5A)).ok());
  EXPECT_EQ(pep->Reject(req.info, {}).code(), absl::StatusCode::kNotFound);
  EqErrEntry err = NextErr(0);
  EXPECT_EQ(err.fid, ep.get());
  EXPECT_EQ(err.err, ECONNREFUSED);
  EXPECT_EQ(err.prov_errno, -28);  // IB REJ "consumer reject"
  EXPECT_EQ(err.err_data, Fill(148, 0x5A));
  EXPECT_EQ(ToFiErrno(eq_[0]->Read().status()), -EAGAIN);
}

TEST_F(FiCmTest, NoListenerIsRefusedWithReason8) {
  auto ep = *Endpoint::Create(*eq_[0]);
  ASSERT_TRUE(ep->Connect(Dest(), {}).ok());
  EqErrEntry err = NextErr(0);
  EXPECT_EQ(err.err, ECONNREFUSED);
  EXPECT_EQ(err.prov_errno, -8);
}

TEST_F(FiCmTest, ConnectOnlyOncePerEndpoint) {
  auto pep = Listener();
  auto ep = *Endpoint::Create(*eq_[0]);
  EXPECT_THAT(ep->Connect(Dest(), Fill(57, 0)).message(),
              HasSubstr("param is 57 bytes; the REQ carries at most 56"));
  ASSERT_TRUE(ep->Connect(Dest(), {}).ok());
  absl::Status again = ep->Connect(Dest(), {});
  EXPECT_EQ(ToFiErrno(again), -kFiEopbadstate);
  EXPECT_THAT(again.message(), HasSubstr("once per endpoint"));
  EqEntry req = Next(1, EqEvent::kConnReq);
  ASSERT_TRUE(pep->Reject(req.info, {}).ok());
  NextErr(0);
  EXPECT_THAT(ep->Connect(Dest(), {}).message(), HasSubstr("once per endpoint"));
}

TEST_F(FiCmTest, ShutdownReachesThePeerOnly) {
  auto pep = Listener();
  auto ep = *Endpoint::Create(*eq_[0]);
  EXPECT_EQ(ep->Shutdown(0).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ep->Connect(Dest(), {}).ok());
  EqEntry req = Next(1, EqEvent::kConnReq);
  auto acc = *Endpoint::FromConnReq(*eq_[1], req.info);
  ASSERT_TRUE(acc->Accept({}).ok());
  Next(0, EqEvent::kConnected);
  Next(1, EqEvent::kConnected);
  absl::Status bad = ep->Shutdown(1);
  EXPECT_EQ(ToFiErrno(bad), -kFiEbadflags);
  ASSERT_TRUE(ep->Shutdown(0).ok());
  EqEntry sd = Next(1, EqEvent::kShutdown);
  EXPECT_EQ(sd.fid, acc.get());
  Settle();
  EXPECT_EQ(eq_[0]->pending(), 0u);  // the caller of Shutdown gets no FI_SHUTDOWN
  EXPECT_EQ(eq_[1]->pending(), 0u);
  EXPECT_EQ(acc->Shutdown(0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(FiCmTest, GetnameGetpeerTruncation) {
  auto pep = Listener();
  size_t len = 4;
  uint8_t small[4] = {0xEE, 0xEE, 0xEE, 0xEE};
  absl::Status s = pep->GetName(small, &len);
  EXPECT_EQ(ToFiErrno(s), -kFiEtoosmall);
  EXPECT_EQ(len, sizeof(sockaddr_in));  // the size needed
  EXPECT_EQ(small[0], AF_INET);         // truncated copy
  uint8_t buf[64];
  len = sizeof buf;
  ASSERT_TRUE(pep->GetName(buf, &len).ok());
  EXPECT_EQ(len, sizeof(sockaddr_in));
  Address back = *DecodeSockaddr({buf, len});
  EXPECT_EQ(back.port, kPort);
  EXPECT_EQ(back.ipv4(), f_->host(1).ip.ipv4());

  auto ep = *Endpoint::Create(*eq_[0]);
  len = sizeof buf;
  EXPECT_EQ(ep->GetName(buf, &len).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ep->Connect(Dest(), {}).ok());
  len = sizeof buf;
  EXPECT_THAT(ep->GetPeer(buf, &len).message(), HasSubstr("after FI_CONNECTED"));
  EqEntry req = Next(1, EqEvent::kConnReq);
  auto acc = *Endpoint::FromConnReq(*eq_[1], req.info);
  ASSERT_TRUE(acc->Accept({}).ok());
  Next(0, EqEvent::kConnected);
  len = 0;
  EXPECT_EQ(ToFiErrno(ep->GetPeer(nullptr, &len)), -kFiEtoosmall);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  ASSERT_TRUE(ep->GetPeer(buf, &len).ok());
  Address peer = *DecodeSockaddr({buf, len});
  EXPECT_EQ(peer.ipv4(), f_->host(1).ip.ipv4());
  EXPECT_EQ(peer.port, kPort);
  len = sizeof buf;
  ASSERT_TRUE(ep->GetName(buf, &len).ok());
  EXPECT_EQ(DecodeSockaddr({buf, len})->ipv4(), f_->host(0).ip.ipv4());
}

TEST_F(FiCmTest, SockaddrIbRoundTrip) {
  mad::Gid g = mad::Gid::FromParts(0xfe80000000000000ull, 0x1234);
  Address a = Address::Ib(g, 5, 0x1000000000000abcull, 0x8001);
  EXPECT_EQ(SockaddrSize(a), 48u);
  EXPECT_THAT(DecodeSockaddr(std::vector<uint8_t>(47, 0)).status().message(),
              HasSubstr("family 0"));
  std::vector<uint8_t> v(2, 0);
  v[0] = 27;
  EXPECT_THAT(DecodeSockaddr(v).status().message(), HasSubstr("sockaddr_ib is 48 bytes; got 2"));
}

TEST_F(FiCmTest, CmDataSizePerStep) {
  EXPECT_EQ(CmDataSizeFor(CmStep::kConnect, PortSpace::kTcp), 56u);
  EXPECT_EQ(CmDataSizeFor(CmStep::kConnect, PortSpace::kIb), 92u);
  EXPECT_EQ(CmDataSizeFor(CmStep::kAccept, PortSpace::kTcp), 196u);
  EXPECT_EQ(CmDataSizeFor(CmStep::kReject, PortSpace::kIb), 148u);
  EXPECT_EQ(CmDataSizeFor(CmStep::kShutdown, PortSpace::kTcp), 0u);
  auto pep = *PassiveEndpoint::Create(*eq_[1], PortSpace::kIb);
  EXPECT_EQ(pep->CmDataSize(), 92u);
}

TEST_F(FiCmTest, BacklogIsAdjustable) {
  auto pep = Listener(/*backlog=*/1);
  EXPECT_FALSE(pep->SetBacklog(-1).ok());
  auto e1 = *Endpoint::Create(*eq_[0]);
  auto e2 = *Endpoint::Create(*eq_[0]);
  RecordingQp q1(0x501), q2(0x502);  // distinct QPNs, else the second is "stale" (REJ 10)
  ASSERT_TRUE(e1->SetQp(&q1).ok());
  ASSERT_TRUE(e2->SetQp(&q2).ok());
  ASSERT_TRUE(e1->Connect(Dest(), {}).ok());
  Next(1, EqEvent::kConnReq);  // held in REQ_RCVD: the backlog of 1 is full
  ASSERT_TRUE(e2->Connect(Dest(), {}).ok());
  EqErrEntry err = NextErr(0);
  EXPECT_EQ(err.fid, e2.get());
  EXPECT_EQ(err.prov_errno, -3);  // REJ "no resources" (backlog)
}

TEST_F(FiCmTest, BacklogChangesOnALiveListener) {
  auto pep = Listener(/*backlog=*/4);
  auto e1 = *Endpoint::Create(*eq_[0]);
  auto e2 = *Endpoint::Create(*eq_[0]);
  auto e3 = *Endpoint::Create(*eq_[0]);
  RecordingQp q1(0x511), q2(0x512), q3(0x513);
  ASSERT_TRUE(e1->SetQp(&q1).ok());
  ASSERT_TRUE(e2->SetQp(&q2).ok());
  ASSERT_TRUE(e3->SetQp(&q3).ok());
  ASSERT_TRUE(e1->Connect(Dest(), {}).ok());
  EqEntry r1 = Next(1, EqEvent::kConnReq);  // 1 pending of 4
  // Shrink while listening: 1 pending fills a backlog of 1.
  ASSERT_TRUE(pep->SetBacklog(1).ok());
  EXPECT_EQ(f_->host(1).device->node().cm().counters().backlog_rejected, 0u);
  ASSERT_TRUE(e2->Connect(Dest(), {}).ok());
  EqErrEntry err = NextErr(0);
  EXPECT_EQ(err.fid, e2.get());
  EXPECT_EQ(err.err, ECONNREFUSED);
  EXPECT_EQ(err.prov_errno, -3);  // REJ 3, the backlog policy's answer
  EXPECT_EQ(f_->host(1).device->node().cm().counters().backlog_rejected, 1u);
  EXPECT_EQ(ToFiErrno(eq_[1]->Read().status()), -EAGAIN) << "no CONNREQ for e2";
  // Grow it again: the next REQ is delivered although r1 is still pending.
  ASSERT_TRUE(pep->SetBacklog(2).ok());
  ASSERT_TRUE(e3->Connect(Dest(), {}).ok());
  EqEntry r3 = Next(1, EqEvent::kConnReq);
  EXPECT_NE(r3.info.handle, r1.info.handle);
  EXPECT_EQ(f_->host(1).device->node().cm().counters().backlog_rejected, 1u);
  EXPECT_FALSE(pep->SetBacklog(-1).ok());
  ASSERT_TRUE(pep->SetBacklog(0).ok());  // back to the default
  ASSERT_TRUE(pep->Reject(r1.info, {}).ok());
  ASSERT_TRUE(pep->Reject(r3.info, {}).ok());
}

TEST_F(FiCmTest, AttachedQpMovesAtTheRightPoints) {
  auto pep = Listener();
  auto ep = *Endpoint::Create(*eq_[0]);
  RecordingQp qa(0x300), qb(0x400);
  ASSERT_TRUE(ep->SetQp(&qa).ok());
  ASSERT_TRUE(ep->Connect(Dest(), {}).ok());
  EqEntry req = Next(1, EqEvent::kConnReq);
  EXPECT_THAT(qa.log, ElementsAre("INIT"));  // before the REQ
  auto acc = *Endpoint::FromConnReq(*eq_[1], req.info);
  ASSERT_TRUE(acc->SetQp(&qb).ok());
  ASSERT_TRUE(acc->Accept({}).ok());
  // Passive: INIT, RTR, RTS before the REP leaves (Accept returned).
  EXPECT_THAT(qb.log, ElementsAre("INIT", "RTR", "RTS"));
  EXPECT_THAT(qa.log, ElementsAre("INIT"));  // the REP has not arrived yet
  Next(0, EqEvent::kConnected);
  // Active: INIT again at the REP with the connection's access flags
  // (librdmacm's ucma_modify_qp_rtr), then RTR, RTS.
  EXPECT_THAT(qa.log, ElementsAre("INIT", "INIT", "RTR", "RTS"));
  Next(1, EqEvent::kConnected);
  // The attributes cross: each side's RTR rq_psn is the other's RTS sq_psn.
  EXPECT_EQ(qa.attrs[2].dest_qpn, 0x400u);
  EXPECT_EQ(qb.attrs[1].dest_qpn, 0x300u);
  EXPECT_EQ(qa.attrs[2].rq_psn, qb.attrs[2].sq_psn);
  EXPECT_EQ(qb.attrs[1].rq_psn, qa.attrs[3].sq_psn);
  EXPECT_EQ(qa.attrs[2].av.dlid, f_->host(1).device->port().lid);
  EXPECT_EQ(qb.attrs[1].av.dlid, f_->host(0).device->port().lid);
  ASSERT_TRUE(acc->Shutdown(0).ok());
  EXPECT_THAT(qb.log, ElementsAre("INIT", "RTR", "RTS", "ERROR"));
  Next(0, EqEvent::kShutdown);
  // The DREQ receiver: ERROR on DISCONNECTED, and again from the disconnect
  // that sends the DREP (rdma_cm's; ERR -> ERR is legal on verbs).
  EXPECT_THAT(qa.log, ElementsAre("INIT", "INIT", "RTR", "RTS", "ERROR", "ERROR"));
}

TEST_F(FiCmTest, RejectMovesTheActiveQpToError) {
  auto pep = Listener();
  auto ep = *Endpoint::Create(*eq_[0]);
  RecordingQp qa(0x300);
  ASSERT_TRUE(ep->SetQp(&qa).ok());
  ASSERT_TRUE(ep->Connect(Dest(), {}).ok());
  EqEntry req = Next(1, EqEvent::kConnReq);
  ASSERT_TRUE(pep->Reject(req.info, {}).ok());
  NextErr(0);
  EXPECT_THAT(qa.log, ElementsAre("INIT", "ERROR"));
}

TEST_F(FiCmTest, JoinFlagsHaveLibfabricValues) {
  // rdma/fabric.h: FI_RECV (1ULL << 10), FI_SEND (1ULL << 11).
  static_assert(kJoinRecv == (1ULL << 10));
  static_assert(kJoinSend == (1ULL << 11));
  EXPECT_EQ(static_cast<uint64_t>(kJoinRecv), 0x400u);
  EXPECT_EQ(static_cast<uint64_t>(kJoinSend), 0x800u);
  RecordingQp qp(0x710);  // outlives the endpoint, which leaves (detaches) on close
  auto ep = *Endpoint::Create(*eq_[0], PortSpace::kUdp);
  ASSERT_TRUE(ep->SetQp(&qp).ok());
  std::vector<uint8_t> sa(sizeof(sockaddr_in));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(f_->host(0).ip.ipv4());
  std::memcpy(sa.data(), &sin, sizeof sin);
  ASSERT_TRUE(ep->SetName(sa.data(), sa.size()).ok());
  // The raw libfabric numbers: FI_SEND alone is send-only (no attach).
  int c = 0;
  Multicast* send = *ep->Join(*Address::Parse("239.1.1.5"), uint32_t{1} << 11, &c);
  EXPECT_TRUE(send->send_only());
  Next(0, EqEvent::kJoinComplete);
  EXPECT_TRUE(qp.log.empty());
  Multicast* recv = *ep->Join(*Address::Parse("239.1.1.6"), uint32_t{1} << 10, &c);
  EXPECT_FALSE(recv->send_only());
  Next(0, EqEvent::kJoinComplete);
  EXPECT_THAT(qp.log, ElementsAre("ATTACH"));
  Multicast* both = *ep->Join(*Address::Parse("239.1.1.7"), kJoinSend | kJoinRecv, &c);
  EXPECT_FALSE(both->send_only());
  Next(0, EqEvent::kJoinComplete);
  EXPECT_THAT(qp.log, ElementsAre("ATTACH", "ATTACH"));
  EXPECT_THAT(ep->Join(*Address::Parse("239.1.1.8"), uint32_t{1} << 12, &c).status().message(),
              HasSubstr("FI_EBADFLAGS"));
  ep.reset();  // fi_close: leaves all three; detaches the two attached
  EXPECT_THAT(qp.log, ElementsAre("ATTACH", "ATTACH", "DETACH", "DETACH"));
  Settle();
  EXPECT_EQ(f_->sa().groups(), 0u);
}

TEST_F(FiCmTest, JoinSendOnlyDoesNotAttachAndLeaveDetaches) {
  auto ep = *Endpoint::Create(*eq_[0], PortSpace::kUdp);
  RecordingQp qp(0x700);
  ASSERT_TRUE(ep->SetQp(&qp).ok());
  std::vector<uint8_t> sa(sizeof(sockaddr_in));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(f_->host(0).ip.ipv4());
  std::memcpy(sa.data(), &sin, sizeof sin);
  ASSERT_TRUE(ep->SetName(sa.data(), sa.size()).ok());
  EXPECT_THAT(ep->Join(*Address::Parse("239.1.1.1"), 1u << 3, nullptr).status().message(),
              HasSubstr("FI_EBADFLAGS"));

  int c1 = 0, c2 = 0;
  Multicast* send_only = *ep->Join(*Address::Parse("239.1.1.1"), kJoinSend, &c1);
  EXPECT_TRUE(send_only->send_only());
  EXPECT_EQ(send_only->Addr().status().code(), absl::StatusCode::kFailedPrecondition);
  EqEntry j1 = Next(0, EqEvent::kJoinComplete);
  EXPECT_EQ(j1.fid, send_only);
  EXPECT_EQ(j1.context, &c1);
  McAddr a1 = *send_only->Addr();
  EXPECT_GE(a1.ah.dlid, 0xC000);
  EXPECT_EQ(a1.qpn, kMulticastQpn);
  EXPECT_EQ(a1.qkey, kUdpQkey);
  EXPECT_TRUE(qp.log.empty());  // send-only: no attach

  Multicast* recv = *ep->Join(*Address::Parse("239.1.1.2"), kJoinRecv, &c2);
  EXPECT_FALSE(recv->send_only());
  EqEntry j2 = Next(0, EqEvent::kJoinComplete);
  EXPECT_EQ(j2.context, &c2);
  EXPECT_THAT(qp.log, ElementsAre("ATTACH"));
  EXPECT_EQ(qp.attached_mlid, recv->Addr()->ah.dlid);

  ASSERT_TRUE(recv->Close().ok());
  EXPECT_THAT(qp.log, ElementsAre("ATTACH", "DETACH"));
  EXPECT_EQ(recv->Close().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(send_only->Close().ok());
  EXPECT_THAT(qp.log, ElementsAre("ATTACH", "DETACH"));  // nothing attached to detach
  Settle();
  EXPECT_EQ(f_->sa().groups(), 0u);
}

}  // namespace
}  // namespace uscm::fi
