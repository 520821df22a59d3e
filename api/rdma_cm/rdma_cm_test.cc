// The rdma_cm-style API on the simulated fabric (two hosts, a switch, the
// simulated SA), in virtual time: librdmacm flows, rejects, ECE, UD/SIDR,
// multicast, backlog, misuse errors, and a lossy scenario that must end with
// every table empty.
#include "api/rdma_cm/rdma_cm.h"

#include <cerrno>
#include <vector>

#include "api/rdma_cm/rdma_cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SimFabric;

constexpr uint16_t kPort = 7471;

std::vector<uint8_t> Fill(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i);
  return v;
}

class RdmaCmTest : public ::testing::Test {
 protected:
  void Build(const sim::FaultInjectorOptions* faults = nullptr) {
    auto f = SimFabric::Create(/*seed=*/11, faults);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
  }
  void SetUp() override { Build(); }

  EventChannel& ch(int i) { return *f_->host(i).channel; }
  Device& dev(int i) { return *f_->host(i).device; }

  Event Next(int host, EventType want) {
    absl::StatusOr<Event> e = f_->Next(ch(host));
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return Event{};
    EXPECT_EQ(e->event, want) << EventTypeName(e->event) << " status " << e->status << " "
                              << e->detail;
    return *e;
  }

  CmId* Listener(PortSpace ps = PortSpace::kTcp, int backlog = 16) {
    CmId* l = *ch(1).CreateId(nullptr, ps);
    Address a = f_->host(1).ip;
    a.port = kPort;
    EXPECT_TRUE(l->BindAddr(a).ok());
    absl::Status s = l->Listen(backlog);
    EXPECT_TRUE(s.ok()) << s;
    return l;
  }

  // Active id on host 0 resolved up to ROUTE_RESOLVED.
  CmId* Resolved(PortSpace ps = PortSpace::kTcp) {
    CmId* id = *ch(0).CreateId(nullptr, ps);
    Address dst = f_->host(1).ip;
    dst.port = kPort;
    EXPECT_TRUE(id->ResolveAddr(absl::nullopt, dst).ok());
    Next(0, EventType::kAddrResolved);
    EXPECT_TRUE(id->ResolveRoute().ok());
    Next(0, EventType::kRouteResolved);
    return id;
  }

  void ExpectEmpty() {
    f_->RunFor(mad::Duration::Seconds(300));
    for (int i = 0; i < 2; ++i) {
      cm::CmEndpoint& cm = dev(i).node().cm();
      EXPECT_EQ(cm.connection_count(), 0u) << "host " << i;
      EXPECT_EQ(cm.table_entries(), 0u) << "host " << i;
      EXPECT_EQ(cm.listener_count(), 0u) << "host " << i;
      EXPECT_TRUE(cm.timers_empty()) << "host " << i;
      EXPECT_EQ(dev(i).node().agent().pending_requests(), 0u);
      EXPECT_EQ(dev(i).id_count(), 0u) << "host " << i;
      EXPECT_EQ(ch(i).queued(), 0u);
      EXPECT_EQ(ch(i).unacked(), 0u);
    }
  }

  std::unique_ptr<SimFabric> f_;
};

TEST_F(RdmaCmTest, FullFlowOverTcpPortSpace) {
  CmId* listener = Listener();
  CmId* a = Resolved();
  ASSERT_TRUE(a->route().has_value());
  ConnParam cp;
  cp.private_data = Fill(56, 1);
  cp.qp_num = 0x101;
  cp.responder_resources = 4;
  cp.initiator_depth = 4;
  ASSERT_TRUE(a->Connect(cp).ok());

  Event req = Next(1, EventType::kConnectRequest);
  EXPECT_EQ(req.listen_id, listener);
  ASSERT_NE(req.id, nullptr);
  EXPECT_EQ(req.conn.private_data, Fill(56, 1));  // the user part, header stripped
  EXPECT_EQ(req.conn.qp_num, 0x101u);
  EXPECT_EQ(req.id->GetPeerAddr().ToString(), a->GetLocalAddr().ToString());
  EXPECT_EQ(req.id->GetLocalAddr().ToString(), "10.0.0.2:7471");
  CmId* b = req.id;

  ConnParam ap;
  ap.private_data = Fill(196, 9);
  ap.qp_num = 0x202;
  ASSERT_TRUE(b->Accept(ap).ok());
  // External QP mode: CONNECT_RESPONSE, attributes, establish.
  Event resp = Next(0, EventType::kConnectResponse);
  EXPECT_EQ(resp.conn.private_data, Fill(196, 9));
  EXPECT_EQ(resp.conn.qp_num, 0x202u) << "the REP's QPN, as the kernel (not the local 0x101)";
  auto rtr = a->InitQpAttr(cm::QpState::kRtr);
  ASSERT_TRUE(rtr.ok()) << rtr.status();
  EXPECT_EQ(rtr->dest_qpn, 0x202u);
  ASSERT_TRUE(a->Establish().ok());
  Event est = Next(1, EventType::kEstablished);
  EXPECT_EQ(est.conn.qp_num, 0u) << "the kernel's passive ESTABLISHED has no parameters";
  EXPECT_EQ(a->state(), IdState::kEstablished);

  ASSERT_TRUE(a->Disconnect().ok());
  Next(1, EventType::kDisconnected);
  ASSERT_TRUE(b->Disconnect().ok());  // answers with DREP
  Next(0, EventType::kDisconnected);
  Next(0, EventType::kTimewaitExit);
  Next(1, EventType::kTimewaitExit);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ASSERT_TRUE(ch(1).DestroyId(b).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

class RecordingQp : public QpTransitioner {
 public:
  explicit RecordingQp(uint32_t qpn) : qpn_(qpn) {}
  uint32_t qp_num() const override { return qpn_; }
  absl::Status Modify(const cm::QpAttributes& a) override {
    states.push_back(a.state);
    if (a.state == cm::QpState::kInit) init_access.push_back(a.access_flags);
    return absl::OkStatus();
  }
  absl::Status ToError() override {
    ++errors;
    return absl::OkStatus();
  }
  std::vector<cm::QpState> states;
  std::vector<uint32_t> init_access;  // the access flags of each INIT
  int errors = 0;

 private:
  uint32_t qpn_;
};

TEST_F(RdmaCmTest, AttachedQpIsTransitionedAndBothSidesSeeEstablished) {
  CmId* listener = Listener();
  CmId* a = Resolved();
  RecordingQp qa(0x300), qb(0x400);
  ASSERT_TRUE(a->SetQp(&qa).ok());
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event req = Next(1, EventType::kConnectRequest);
  ASSERT_TRUE(req.id->SetQp(&qb).ok());
  ConnParam ap;
  ap.private_data = {1, 2, 3};
  ASSERT_TRUE(req.id->Accept(ap).ok());
  Event est = Next(0, EventType::kEstablished);
  EXPECT_EQ(est.conn.private_data.size(), kRepPrivateData);  // the whole REP field
  EXPECT_EQ(est.conn.private_data[2], 3);
  EXPECT_EQ(est.conn.qp_num, 0x400u) << "the peer's QPN, as the kernel's cma_set_rep_event_data";
  Next(1, EventType::kEstablished);
  // The active QP: INIT at connect, INIT again at the REP (librdmacm's
  // ucma_modify_qp_rtr), RTR, RTS.
  EXPECT_THAT(qa.states, ElementsAre(cm::QpState::kInit, cm::QpState::kInit, cm::QpState::kRtr,
                                     cm::QpState::kRts));
  EXPECT_THAT(qb.states, ElementsAre(cm::QpState::kInit, cm::QpState::kRtr, cm::QpState::kRts));
  ASSERT_TRUE(req.id->Disconnect().ok());
  Next(0, EventType::kDisconnected);
  EXPECT_EQ(qa.errors, 1);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());  // DREP on destroy
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

// Each side's QP gets ib_cm's access flags for the connection (the kernel's
// cm_init_qp_init_attr): REMOTE_WRITE, plus REMOTE_READ | REMOTE_ATOMIC when
// the side has responder resources (the active side: the REP's initiator
// depth). The active QP kept the flags set at connect, REMOTE_WRITE |
// REMOTE_READ, whatever the REP said: pyverbs' client QP had access 6 on the
// drop-in and 14 on the kernel (68-dropin-fio).
TEST_F(RdmaCmTest, QpAccessFlagsAreTheConnectionsOnBothSides) {
  constexpr uint32_t kWrite = cm::kAccessRemoteWrite;
  constexpr uint32_t kAll = cm::kAccessRemoteWrite | cm::kAccessRemoteRead |
                            cm::kAccessRemoteAtomic;
  CmId* listener = Listener();
  for (uint8_t depth : {1, 0}) {   // the passive side's initiator depth
    SCOPED_TRACE(::testing::Message() << "passive initiator_depth " << int(depth));
    CmId* a = Resolved();
    RecordingQp qa(0x300 + depth), qb(0x400 + depth);
    ASSERT_TRUE(a->SetQp(&qa).ok());
    ConnParam cp;
    cp.responder_resources = 1;
    cp.initiator_depth = 1;
    ASSERT_TRUE(a->Connect(cp).ok());
    Event req = Next(1, EventType::kConnectRequest);
    ASSERT_TRUE(req.id->SetQp(&qb).ok());
    ConnParam ap;
    ap.responder_resources = 1;
    ap.initiator_depth = depth;
    ASSERT_TRUE(req.id->Accept(ap).ok());
    Next(0, EventType::kEstablished);
    Next(1, EventType::kEstablished);
    ASSERT_EQ(qa.init_access.size(), 2u);
    EXPECT_EQ(qa.init_access.back(), depth > 0 ? kAll : kWrite) << "the active QP at the REP";
    EXPECT_THAT(qb.init_access, ElementsAre(kAll)) << "the passive QP";
    ASSERT_TRUE(a->Disconnect().ok());
    Next(1, EventType::kDisconnected);
    Next(0, EventType::kDisconnected);
    ASSERT_TRUE(ch(1).DestroyId(req.id).ok());
    ASSERT_TRUE(ch(0).DestroyId(a).ok());
  }
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, RejectCarries148BytesAndStatus28) {
  CmId* listener = Listener();
  CmId* a = Resolved();
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event req = Next(1, EventType::kConnectRequest);
  absl::Status tl = req.id->Reject(Fill(149, 0));
  EXPECT_THAT(tl.message(), HasSubstr("149 bytes; REJ carries at most 148"));
  ASSERT_TRUE(req.id->Reject(Fill(148, 5)).ok());
  Event rej = Next(0, EventType::kRejected);
  EXPECT_EQ(rej.status, 28);
  EXPECT_EQ(rej.conn.private_data, Fill(148, 5));
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

// The kernel's rdma_disconnect before ESTABLISHED returns 0 (UCX calls it in
// CONNECT_RESPONSE); uscm's REJ tells the peer at once.
TEST_F(RdmaCmTest, DisconnectBeforeEstablishedRejectsAndReturnsOk) {
  CmId* listener = Listener();
  CmId* a = Resolved();
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event req = Next(1, EventType::kConnectRequest);
  ASSERT_TRUE(req.id->Accept(ConnParam{}).ok());
  Next(0, EventType::kConnectResponse);
  absl::Status s = a->Disconnect();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(a->Disconnect().ok()) << "a second call is 0 too, as the kernel's";
  EXPECT_EQ(Next(1, EventType::kRejected).status, 28);
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());

  // The passive side in CONNECT_REQUEST: the active side is rejected.
  CmId* c = Resolved();
  ASSERT_TRUE(c->Connect(ConnParam{}).ok());
  Event req2 = Next(1, EventType::kConnectRequest);
  s = req2.id->Disconnect();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Next(0, EventType::kRejected).status, 28);
  ASSERT_TRUE(ch(1).DestroyId(req2.id).ok());
  ASSERT_TRUE(ch(0).DestroyId(c).ok());
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, NoListenerIsRejected8) {
  CmId* a = Resolved();
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event rej = Next(0, EventType::kRejected);
  EXPECT_EQ(rej.status, 8);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, EceNegotiationAndRejectEce) {
  CmId* listener = Listener();
  CmId* a = Resolved();
  ASSERT_TRUE(a->SetLocalEce(cm::Ece{0x15b3, 0x5}).ok());
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event req = Next(1, EventType::kConnectRequest);
  auto ece = req.id->GetRemoteEce();
  ASSERT_TRUE(ece.ok()) << ece.status();
  EXPECT_EQ(ece->vendor_id, 0x15b3u);
  EXPECT_EQ(ece->options, 0x5u);
  ASSERT_TRUE(req.id->RejectEce({}).ok());
  Event rej = Next(0, EventType::kRejected);
  EXPECT_EQ(rej.status, 35);
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, UdSidrResolvesQpnAndQkey) {
  CmId* listener = Listener(PortSpace::kUdp);
  CmId* a = Resolved(PortSpace::kUdp);
  ConnParam cp;
  cp.private_data = Fill(180, 3);
  ASSERT_TRUE(a->Connect(cp).ok());
  Event req = Next(1, EventType::kConnectRequest);
  EXPECT_EQ(req.ud.private_data, Fill(180, 3));
  // The new UD id's QP is made before accepting (udaddy's server): INIT
  // attributes without access flags, on the listener's port.
  auto init = req.id->InitQpAttr(cm::QpState::kInit);
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_EQ(init->port_num, dev(1).port().port_num);
  EXPECT_EQ(init->mask & cm::kQpAccessFlags, 0u);
  ConnParam ap;
  ap.qp_num = 0x777;
  ASSERT_TRUE(req.id->Accept(ap).ok());
  Event est = Next(0, EventType::kEstablished);
  EXPECT_EQ(est.ud.qp_num, 0x777u);
  EXPECT_EQ(est.ud.qkey, kUdpQkey);
  EXPECT_EQ(est.ud.ah_attr.dlid, dev(1).port().lid);
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  // No listener: UNREACHABLE with the SIDR status.
  CmId* b = Resolved(PortSpace::kUdp);
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ASSERT_TRUE(b->Connect(ConnParam{}).ok());
  Event un = Next(0, EventType::kUnreachable);
  EXPECT_GT(un.status, 0);
  ASSERT_TRUE(ch(0).DestroyId(b).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, MulticastJoinAndLeave) {
  CmId* id = *ch(0).CreateId(nullptr, PortSpace::kUdp);
  Address dst = f_->host(1).ip;
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, dst).ok());
  Next(0, EventType::kAddrResolved);
  Address group = *Address::Parse("239.1.2.3");
  int ctx = 0;
  ASSERT_TRUE(id->JoinMulticast(group, &ctx).ok());
  Event j = Next(0, EventType::kMulticastJoin);
  EXPECT_EQ(j.mc_context, &ctx);
  EXPECT_EQ(j.ud.qp_num, kMulticastQpn);
  EXPECT_EQ(j.ud.qkey, kUdpQkey);
  EXPECT_GE(j.ud.ah_attr.dlid, 0xC000);
  EXPECT_EQ(j.ud.ah_attr.dgid.raw[0], 0xFF);
  EXPECT_EQ(f_->sa().groups(), 1u);
  EXPECT_THAT(id->JoinMulticast(group, nullptr).message(), HasSubstr("already joined"));
  ASSERT_TRUE(id->LeaveMulticast(group).ok());
  EXPECT_THAT(id->LeaveMulticast(group).message(), HasSubstr("not joined"));
  f_->RunFor(mad::Duration::Seconds(5));
  EXPECT_EQ(f_->sa().groups(), 0u);
  ASSERT_TRUE(ch(0).DestroyId(id).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, MulticastErrorCarriesTheStatusAndTheJoinsContext) {
  CmId* id = *ch(0).CreateId(nullptr, PortSpace::kUdp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, f_->host(1).ip).ok());
  Next(0, EventType::kAddrResolved);
  // An AF_IB group whose GID is not a multicast GID (no 0xFF prefix): the
  // join goes to the SA, which refuses to create it (ERR_REQ_INVALID).
  const Address bad = Address::Ib(*mad::Gid::Parse("fe80::1:2:3:4"), 0, 0);
  int ctx = 0;
  ASSERT_TRUE(id->JoinMulticast(bad, &ctx).ok());
  const uint64_t errors = f_->sa().counters().errors;
  Event e = Next(0, EventType::kMulticastError);
  EXPECT_EQ(e.id, id);
  EXPECT_EQ(e.mc_context, &ctx);
  EXPECT_EQ(e.status, -EINVAL);
  EXPECT_THAT(e.detail, HasSubstr("ERR_REQ_INVALID"));
  EXPECT_EQ(f_->sa().counters().errors, errors + 1);
  EXPECT_EQ(f_->sa().groups(), 0u);
  // As librdmacm: the refused join is freed by leave_multicast.
  ASSERT_TRUE(id->LeaveMulticast(bad).ok());
  EXPECT_THAT(id->LeaveMulticast(bad).message(), HasSubstr("not joined"));
  // A good join on the same id still works and hands back its own context.
  int ctx2 = 0;
  const Address group = *Address::Parse("239.1.2.4");
  ASSERT_TRUE(id->JoinMulticast(group, &ctx2).ok());
  Event j = Next(0, EventType::kMulticastJoin);
  EXPECT_EQ(j.mc_context, &ctx2);
  ASSERT_TRUE(id->LeaveMulticast(group).ok());
  ASSERT_TRUE(ch(0).DestroyId(id).ok());
  ExpectEmpty();
  EXPECT_EQ(f_->sa().groups(), 0u);
}

TEST_F(RdmaCmTest, TosBecomesTheTrafficClassOfTheReqOnTheWire) {
  CmId* listener = Listener();
  CmId* a = *ch(0).CreateId(nullptr, PortSpace::kTcp);
  IdOptions o;
  o.tos = 0x68;
  ASSERT_TRUE(a->SetOption(o).ok());
  Address dst = f_->host(1).ip;
  dst.port = kPort;
  ASSERT_TRUE(a->ResolveAddr(absl::nullopt, dst).ok());
  Next(0, EventType::kAddrResolved);
  ASSERT_TRUE(a->ResolveRoute().ok());
  Next(0, EventType::kRouteResolved);
  ASSERT_TRUE(a->route().has_value());
  EXPECT_EQ(a->route()->traffic_class, 0x68);  // over the SA's path (tclass 0)
  ConnParam p;
  p.qp_num = 0x31;
  ASSERT_TRUE(a->Connect(p).ok());
  Event req = Next(1, EventType::kConnectRequest);
  // The passive side's path is parsed from the REQ that crossed the fabric.
  ASSERT_TRUE(req.id->route().has_value());
  EXPECT_EQ(req.id->route()->traffic_class, 0x68);
  ASSERT_TRUE(req.id->Reject({}).ok());
  Next(0, EventType::kRejected);

  // The IB_PATH option (no SA query): TOS overrides the given path's class.
  CmId* b = *ch(0).CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(b->ResolveAddr(absl::nullopt, dst).ok());
  Next(0, EventType::kAddrResolved);
  IdOptions ob;
  ob.tos = 0x20;
  ob.ib_path = *a->route();
  ob.ib_path->traffic_class = 0;
  ob.ib_path->mtu = 3;  // 1024, as a RoCE port with a 1500-byte Ethernet MTU
  ASSERT_TRUE(b->SetOption(ob).ok());
  ASSERT_TRUE(b->ResolveRoute().ok());
  Next(0, EventType::kRouteResolved);
  EXPECT_EQ(b->route()->traffic_class, 0x20);
  // Past ADDR_RESOLVED other options still change; only a new IB_PATH is refused.
  IdOptions later = b->options();
  later.ack_timeout = 18;
  EXPECT_TRUE(b->SetOption(later).ok());
  later.ib_path->sl = 3;
  EXPECT_THAT(b->SetOption(later).message(), HasSubstr("set_option(IB_PATH)"));
  ConnParam pb;
  pb.qp_num = 0x32;
  ASSERT_TRUE(b->Connect(pb).ok());
  Event req2 = Next(1, EventType::kConnectRequest);
  EXPECT_EQ(req2.id->route()->traffic_class, 0x20);
  auto rtr = req2.id->InitQpAttr(cm::QpState::kRtr);  // the REQ's path MTU
  ASSERT_TRUE(rtr.ok()) << rtr.status();
  EXPECT_EQ(rtr->path_mtu, 3);
  ASSERT_TRUE(req2.id->Reject({}).ok());
  Next(0, EventType::kRejected);
  for (CmId* x : {a, b}) ASSERT_TRUE(ch(0).DestroyId(x).ok());
  for (CmId* x : {req.id, req2.id, listener}) ASSERT_TRUE(ch(1).DestroyId(x).ok());
  ExpectEmpty();
}

// As the kernel's rdma_listen (6.1): REUSEADDR lets binds share an address,
// but a listener holds it alone (the listen checks without REUSEADDR and the
// id loses it).
TEST_F(RdmaCmTest, ReuseAddrSharesABindButAListenerHoldsItsAddressAlone) {
  Address addr = f_->host(1).ip;
  addr.port = kPort;
  IdOptions reuse;
  reuse.reuse_addr = true;
  CmId* l1 = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  CmId* l2 = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  CmId* plain = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(l1->SetOption(reuse).ok());
  ASSERT_TRUE(l2->SetOption(reuse).ok());
  ASSERT_TRUE(l1->BindAddr(addr).ok());
  ASSERT_TRUE(l2->BindAddr(addr).ok());  // both set REUSEADDR: shared
  EXPECT_THAT(plain->BindAddr(addr).message(), HasSubstr("EADDRINUSE"));
  EXPECT_THAT(l1->SetOption(IdOptions{}).message(), HasSubstr("set_option(REUSEADDR)"));
  EXPECT_THAT(l1->Listen(4).message(), HasSubstr("listen: 10.0.0.2:7471 is in use"));
  ASSERT_TRUE(ch(1).DestroyId(l2).ok());
  ASSERT_TRUE(l1->Listen(4).ok());
  EXPECT_EQ(dev(1).node().cm().listener_count(), 1u);
  CmId* a1 = Resolved();
  ConnParam p1;
  p1.qp_num = 0x41;
  ASSERT_TRUE(a1->Connect(p1).ok());
  Event r1 = Next(1, EventType::kConnectRequest);
  EXPECT_EQ(r1.listen_id, l1);
  EXPECT_EQ(r1.id->GetLocalAddr().ToString(), "10.0.0.2:7471");
  ASSERT_TRUE(r1.id->Reject({}).ok());
  Next(0, EventType::kRejected);
  // The listener is no longer reusable: a REUSEADDR bind fails too.
  CmId* late = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(late->SetOption(reuse).ok());
  EXPECT_THAT(late->BindAddr(addr).message(), HasSubstr("EADDRINUSE"));
  ASSERT_TRUE(ch(1).DestroyId(l1).ok());
  ASSERT_TRUE(plain->BindAddr(addr).ok());
  ASSERT_TRUE(ch(0).DestroyId(a1).ok());
  for (CmId* x : {r1.id, plain, late}) ASSERT_TRUE(ch(1).DestroyId(x).ok());
  ExpectEmpty();
}

// Two listeners on one port, an AF-only IPv6 wildcard (first in the CM's
// table) and IPv4 10.0.0.2: the IPv4 request goes to the listener of its
// destination (the kernel's cma_find_listener), not to the first.
TEST_F(RdmaCmTest, ARequestGoesToTheListenerOfItsDestinationAddress) {
  IdOptions af_only;
  af_only.af_only = true;
  CmId* v6 = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(v6->SetOption(af_only).ok());
  Address any6 = *Address::Parse("[::]:7471");
  ASSERT_TRUE(v6->BindAddr(any6).ok());
  ASSERT_TRUE(v6->Listen(4).ok());
  CmId* v4 = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  Address addr = f_->host(1).ip;
  addr.port = kPort;
  ASSERT_TRUE(v4->BindAddr(addr).ok());
  ASSERT_TRUE(v4->Listen(4).ok());
  CmId* a = Resolved();
  ConnParam p;
  p.qp_num = 0x41;
  ASSERT_TRUE(a->Connect(p).ok());
  Event r = Next(1, EventType::kConnectRequest);
  EXPECT_EQ(r.listen_id, v4);
  ASSERT_TRUE(r.id->Reject({}).ok());
  Next(0, EventType::kRejected);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  for (CmId* x : {r.id, v4, v6}) ASSERT_TRUE(ch(1).DestroyId(x).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, SetBacklogOnALiveListener) {
  CmId* listener = Listener(PortSpace::kTcp, /*backlog=*/8);
  CmId* idle = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  EXPECT_THAT(idle->SetBacklog(1).message(), HasSubstr("set_backlog: id is in state IDLE"));
  CmId* a1 = Resolved();
  CmId* a2 = Resolved();
  ConnParam p1, p2;
  p1.qp_num = 0x51;
  p2.qp_num = 0x52;
  ASSERT_TRUE(a1->Connect(p1).ok());
  Event req = Next(1, EventType::kConnectRequest);
  ASSERT_TRUE(listener->SetBacklog(1).ok());  // 1 pending fills it
  ASSERT_TRUE(a2->Connect(p2).ok());
  Event rej = Next(0, EventType::kRejected);
  EXPECT_EQ(rej.status, 3);
  EXPECT_EQ(rej.id, a2);
  ASSERT_TRUE(req.id->Reject({}).ok());
  Next(0, EventType::kRejected);
  for (CmId* x : {a1, a2}) ASSERT_TRUE(ch(0).DestroyId(x).ok());
  for (CmId* x : {req.id, idle, listener}) ASSERT_TRUE(ch(1).DestroyId(x).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, BacklogLimitsPendingRequests) {
  CmId* listener = Listener(PortSpace::kTcp, /*backlog=*/1);
  CmId* a1 = Resolved();
  CmId* a2 = Resolved();
  ConnParam p1, p2;  // distinct QPNs (the same QPN twice is a stale REQ: REJ 10)
  p1.qp_num = 0x11;
  p2.qp_num = 0x12;
  ASSERT_TRUE(a1->Connect(p1).ok());
  ASSERT_TRUE(a2->Connect(p2).ok());
  Event req = Next(1, EventType::kConnectRequest);
  Event rej = Next(0, EventType::kRejected);  // the default policy: REJ 3
  EXPECT_EQ(rej.status, 3);
  EXPECT_EQ(rej.id, a2);
  ASSERT_TRUE(req.id->Reject({}).ok());
  Next(0, EventType::kRejected);
  for (CmId* x : {a1, a2}) ASSERT_TRUE(ch(0).DestroyId(x).ok());
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, MisuseErrorsNameTheProblem) {
  CmId* id = *ch(0).CreateId(nullptr, PortSpace::kTcp);
  EXPECT_THAT(id->Connect(ConnParam{}).message(),
              HasSubstr("connect: id is in state IDLE; expected ROUTE_RESOLVED"));
  EXPECT_THAT(id->ResolveRoute().message(), HasSubstr("expected ADDR_RESOLVED"));
  EXPECT_THAT(id->Listen(1).message(), HasSubstr("bind_addr first"));
  EXPECT_THAT(id->Accept(ConnParam{}).message(), HasSubstr("expected CONNECT_REQUEST"));
  EXPECT_THAT(id->Reject({}).message(), HasSubstr("reject: id is in state IDLE"));
  EXPECT_THAT(id->RejectEce({}).message(), HasSubstr("reject_ece"));
  EXPECT_THAT(id->Establish().message(), HasSubstr("expected CONNECT_RESPONSE"));
  EXPECT_THAT(id->Disconnect().message(), HasSubstr("disconnect: id is in state IDLE"));
  EXPECT_EQ(id->GetRemoteEce()->vendor_id, 0u) << "librdmacm: no state check, zeros";
  EXPECT_THAT(id->JoinMulticast(*Address::Parse("239.0.0.1"), nullptr).message(),
              HasSubstr("only UD ids"));
  EXPECT_THAT(id->BindAddr(*Address::Parse("10.9.9.9")).message(),
              HasSubstr("is not an address of"));
  EXPECT_THAT(id->SetLocalEce(cm::Ece{0x1000000, 0}).message(), HasSubstr("24 bits"));
  IdOptions o;
  o.ack_timeout = 32;
  EXPECT_THAT(id->SetOption(o).message(), HasSubstr("at most 31"));
  o = IdOptions();
  o.max_cm_retries = 16;
  EXPECT_THAT(id->SetOption(o).message(), HasSubstr("at most 15"));
  EXPECT_THAT(ch(0).CreateId(nullptr, static_cast<PortSpace>(7)).status().message(),
              HasSubstr("RDMA_PS_TCP"));
  EXPECT_THAT(ch(0).DestroyId(nullptr).message(), HasSubstr("unknown id"));
  EXPECT_THAT(ch(0).GetEvent().status().message(), HasSubstr("no event queued"));
  Event fake;
  EXPECT_THAT(ch(0).AckEvent(&fake).message(), HasSubstr("not an event of this channel"));

  // Too-long private data names the limit (REQ with the CMA header: 56).
  ASSERT_TRUE(ch(0).DestroyId(id).ok());
  CmId* listener = Listener();
  CmId* a = Resolved();
  ConnParam big;
  big.private_data = Fill(57, 0);
  EXPECT_THAT(a->Connect(big).message(),
              HasSubstr("57 bytes; REQ with the 36-byte CMA header carries at most 56"));
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  // Events retrieved and not acked block destroy_id (EBUSY in C).
  ASSERT_TRUE(f_->scheduler()
                  .RunUntil([&] { return ch(1).queued() > 0; },
                            f_->scheduler().Now() + mad::Duration::Seconds(10))
                  .ok());
  Event* req = *ch(1).GetEvent();
  EXPECT_THAT(ch(1).DestroyId(req->id).message(), HasSubstr("not acked"));
  ConnParam rep;
  rep.private_data = Fill(197, 0);
  EXPECT_THAT(req->id->Accept(rep).message(), HasSubstr("197 bytes; REP carries at most 196"));
  CmId* b = req->id;
  ASSERT_TRUE(ch(1).AckEvent(req).ok());
  // A second listener on the same port needs REUSEADDR.
  CmId* l2 = *ch(1).CreateId(nullptr, PortSpace::kTcp);
  Address addr = f_->host(1).ip;
  addr.port = kPort;
  EXPECT_THAT(l2->BindAddr(addr).message(), HasSubstr("REUSEADDR"));
  ASSERT_TRUE(ch(1).DestroyId(l2).ok());
  ASSERT_TRUE(ch(1).DestroyId(b).ok());  // REJ 28 to the peer
  Event rej = Next(0, EventType::kRejected);
  EXPECT_EQ(rej.status, 28);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
}

TEST_F(RdmaCmTest, AddressErrorForUnknownNeighbour) {
  CmId* id = *ch(0).CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("10.0.0.77:1")).ok());
  Event e = Next(0, EventType::kAddrError);
  EXPECT_THAT(e.detail, HasSubstr("no neighbour entry"));
  ASSERT_TRUE(ch(0).DestroyId(id).ok());
  ExpectEmpty();
}

// The whole flow, many times, with 10% loss, duplication and reordering on
// both hosts' QP1: every connection ends and every table is empty.
TEST_F(RdmaCmTest, LossDupReorderEndsWithEveryTableEmpty) {
  sim::FaultInjectorOptions faults;
  faults.seed = 99;
  for (sim::FaultSpec* s : {&faults.send, &faults.receive}) {
    s->drop = 0.05;  // per direction: ~10% per MAD end to end
    s->duplicate = 0.05;
    s->reorder = 0.05;
    s->reorder_delay = mad::Duration::Micros(200);
  }
  Build(&faults);
  CmId* listener = Listener();
  int established = 0;
  for (int round = 0; round < 10; ++round) {
    CmId* a = *ch(0).CreateId(nullptr, PortSpace::kTcp);
    Address dst = f_->host(1).ip;
    dst.port = kPort;
    ASSERT_TRUE(a->ResolveAddr(absl::nullopt, dst).ok());
    Next(0, EventType::kAddrResolved);
    ASSERT_TRUE(a->ResolveRoute().ok());
    Event r = *f_->Next(ch(0));
    if (r.event != EventType::kRouteResolved) {
      ASSERT_TRUE(ch(0).DestroyId(a).ok());
      continue;
    }
    RecordingQp qa(0x500 + round), qb(0x600 + round);
    ASSERT_TRUE(a->SetQp(&qa).ok());
    ASSERT_TRUE(a->Connect(ConnParam{}).ok());
    CmId* b = nullptr;
    bool a_done = false;
    // Drive both channels until the active side ends one way or another.
    while (!a_done) {
      ASSERT_TRUE(f_->scheduler()
                      .RunUntil([&] { return ch(0).queued() + ch(1).queued() > 0; },
                                f_->scheduler().Now() + mad::Duration::Seconds(600))
                      .ok());
      while (ch(1).queued() > 0) {
        Event* e = *ch(1).GetEvent();
        if (e->event == EventType::kConnectRequest) {
          b = e->id;
          ASSERT_TRUE(b->SetQp(&qb).ok());
          ASSERT_TRUE(b->Accept(ConnParam{}).ok());
        }
        ASSERT_TRUE(ch(1).AckEvent(e).ok());
      }
      while (ch(0).queued() > 0) {
        Event* e = *ch(0).GetEvent();
        if (e->event == EventType::kEstablished) {
          ++established;
          ASSERT_TRUE(a->Disconnect().ok());
        } else if (e->event != EventType::kDisconnected) {
          a_done = true;  // REJECTED / UNREACHABLE / TIMEWAIT_EXIT
        }
        ASSERT_TRUE(ch(0).AckEvent(e).ok());
      }
    }
    f_->RunFor(mad::Duration::Seconds(60));
    while (ch(1).queued() > 0) ASSERT_TRUE(ch(1).AckEvent(*ch(1).GetEvent()).ok());
    ASSERT_TRUE(ch(0).DestroyId(a).ok());
    if (b != nullptr) {
      ASSERT_TRUE(ch(1).DestroyId(b).ok());
    }
  }
  EXPECT_GE(established, 5);
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
  ExpectEmpty();
  EXPECT_GT(f_->host(0).faults->send_counters().dropped, 0u);
  EXPECT_GT(f_->host(0).faults->send_counters().duplicated, 0u);
}

}  // namespace
}  // namespace uscm
