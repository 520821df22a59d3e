// ToIbvQpAttr field by field (RC active / passive from a real CM exchange,
// UC, UD, alternate path, GRH), and the VerbsQp error paths with fake verbs
// entry points (no device needed).
#include "verbs/qp_transitions.h"

#include <errno.h>

#include <cstring>
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

using ::testing::HasSubstr;
using cm::QpState;

// A connected pair (digest §5): A sent REQ (qpn 0x111, psn 0x1234, resp 4,
// init 2, retry 6, rnr 5, ack timeout 15, SL 3); B answered REP (qpn 0x222,
// psn 0x5678, resp 1, init 3, rnr 4).
struct Connected {
  Connected(bool with_alt = false, bool routed = false) {
    EXPECT_TRUE(p.b.Listen(cm::testing::kService, ~uint64_t{0}, 8, false).ok());
    cm::ConnectParams cp = cm::testing::MakeConnect(0x111, 0x1234);
    cp.primary.subnet_local = !routed;
    cp.primary.flow_label = 0xABCDE;
    cp.primary.hop_limit = 64;
    cp.primary.traffic_class = 0x20;
    cp.primary.packet_rate = 7;
    if (with_alt) {
      cm::PathInfo alt = cp.primary;
      alt.local_lid = 11;
      alt.remote_lid = 12;
      alt.sl = 5;
      alt.local_ack_timeout = 18;
      alt.subnet_local = true;
      cp.alternate = alt;
    }
    a_id = *p.a.Connect(p.now, cp);
    p.b.HandleMad(p.now, p.addr_a, cm::testing::DrainTx(p.a).at(0).mad);
    b_id = cm::testing::DrainEvents(p.b).at(0).conn;
    EXPECT_TRUE(p.b.Accept(p.now, b_id, cm::testing::MakeAccept(0x222, 0x5678)).ok());
    p.a.HandleMad(p.now, p.addr_b, cm::testing::DrainTx(p.b).at(0).mad);
  }
  IbvQpAttr A(QpState s, DataQpType t = DataQpType::kRc) {
    return *ToIbvQpAttr(*p.a.GetQpAttributes(a_id, s), t);
  }
  IbvQpAttr B(QpState s, DataQpType t = DataQpType::kRc) {
    return *ToIbvQpAttr(*p.b.GetQpAttributes(b_id, s), t);
  }
  cm::testing::Pair p;
  cm::ConnId a_id, b_id;
};

TEST(ToIbvQpAttrTest, RcInitBothSides) {
  Connected c;
  IbvQpAttr a = c.A(QpState::kInit);
  EXPECT_EQ(a.mask, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
  EXPECT_EQ(a.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(a.attr.qp_access_flags,
            unsigned{IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC});
  EXPECT_EQ(a.attr.pkey_index, 0);
  EXPECT_EQ(a.attr.port_num, 1);
  IbvQpAttr b = c.B(QpState::kInit);
  EXPECT_EQ(b.mask, a.mask);
  // B's responder resources = REQ initiator depth (2) > 0: read/atomic too.
  EXPECT_EQ(b.attr.qp_access_flags, a.attr.qp_access_flags);
}

TEST(ToIbvQpAttrTest, RcRtrActiveAndPassive) {
  Connected c;
  IbvQpAttr a = c.A(QpState::kRtr);
  EXPECT_EQ(a.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  EXPECT_EQ(a.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(a.attr.path_mtu, IBV_MTU_2048);
  EXPECT_EQ(a.attr.dest_qp_num, 0x222u);
  EXPECT_EQ(a.attr.rq_psn, 0x1234u);          // own PSN
  EXPECT_EQ(a.attr.max_dest_rd_atomic, 3);    // REP initiator depth (swap)
  EXPECT_EQ(a.attr.min_rnr_timer, 0);
  EXPECT_EQ(a.attr.ah_attr.dlid, 2);
  EXPECT_EQ(a.attr.ah_attr.sl, 3);
  EXPECT_EQ(a.attr.ah_attr.static_rate, 7);
  EXPECT_EQ(a.attr.ah_attr.port_num, 1);
  EXPECT_EQ(a.attr.ah_attr.is_global, 0);     // subnet-local IB: no GRH
  EXPECT_EQ(a.attr.ah_attr.grh.hop_limit, 0); // GRH left zero
  EXPECT_EQ(a.attr.ah_attr.src_path_bits, 0);
  EXPECT_EQ(a.attr.alt_port_num, 0);          // no ALT_PATH bit, nothing filled

  IbvQpAttr b = c.B(QpState::kRtr);
  EXPECT_EQ(b.mask, a.mask);
  EXPECT_EQ(b.attr.dest_qp_num, 0x111u);
  EXPECT_EQ(b.attr.rq_psn, 0x5678u);
  EXPECT_EQ(b.attr.max_dest_rd_atomic, 1);  // B's own responder resources (accept)
  EXPECT_EQ(b.attr.ah_attr.dlid, 1);
  EXPECT_EQ(b.attr.ah_attr.sl, 3);
}

TEST(ToIbvQpAttrTest, RcRtsActiveAndPassive) {
  Connected c;
  IbvQpAttr a = c.A(QpState::kRts);
  EXPECT_EQ(a.mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT);
  EXPECT_EQ(a.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(a.attr.sq_psn, 0x5678u);  // peer PSN
  EXPECT_EQ(a.attr.retry_cnt, 6);
  EXPECT_EQ(a.attr.rnr_retry, 4);     // what the REP said
  EXPECT_EQ(a.attr.max_rd_atomic, 1); // REP responder resources
  EXPECT_EQ(a.attr.timeout, 15);
  IbvQpAttr b = c.B(QpState::kRts);
  EXPECT_EQ(b.mask, a.mask);
  EXPECT_EQ(b.attr.sq_psn, 0x1234u);
  EXPECT_EQ(b.attr.rnr_retry, 5);     // what the REQ said
  EXPECT_EQ(b.attr.retry_cnt, 6);
  EXPECT_EQ(b.attr.max_rd_atomic, 3);
}

TEST(ToIbvQpAttrTest, UcDropsAckAndAtomicFields) {
  Connected c;
  IbvQpAttr i = c.A(QpState::kInit, DataQpType::kUc);
  EXPECT_EQ(i.attr.qp_access_flags, unsigned{IBV_ACCESS_REMOTE_WRITE});
  IbvQpAttr r = c.A(QpState::kRtr, DataQpType::kUc);
  EXPECT_EQ(r.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN);
  EXPECT_EQ(r.attr.max_dest_rd_atomic, 0);
  EXPECT_EQ(r.attr.dest_qp_num, 0x222u);
  IbvQpAttr s = c.A(QpState::kRts, DataQpType::kUc);
  EXPECT_EQ(s.mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
  EXPECT_EQ(s.attr.sq_psn, 0x5678u);
  EXPECT_EQ(s.attr.retry_cnt, 0);
  EXPECT_EQ(s.attr.timeout, 0);
}

TEST(ToIbvQpAttrTest, UdIsQkeyThenStateThenSqPsn) {
  cm::QpAttributes init;
  init.state = QpState::kInit;
  init.mask = cm::kQpState | cm::kQpPkeyIndex | cm::kQpPort;
  init.pkey_index = 3;
  init.port_num = 2;
  IbvMapOptions o;
  o.qkey = 0x01234567;
  IbvQpAttr i = *ToIbvQpAttr(init, DataQpType::kUd, o);
  EXPECT_EQ(i.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  EXPECT_EQ(i.attr.qkey, 0x01234567u);
  EXPECT_EQ(i.attr.pkey_index, 3);
  EXPECT_EQ(i.attr.port_num, 2);
  EXPECT_EQ(i.attr.qp_access_flags, 0u);

  Connected c;  // RC attributes given for a UD QP: reduced to what UD takes
  IbvQpAttr r = c.A(QpState::kRtr, DataQpType::kUd);
  EXPECT_EQ(r.mask, IBV_QP_STATE);
  EXPECT_EQ(r.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(r.attr.dest_qp_num, 0u);
  IbvQpAttr s = c.A(QpState::kRts, DataQpType::kUd);
  EXPECT_EQ(s.mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
  EXPECT_EQ(s.attr.retry_cnt, 0);
}

TEST(ToIbvQpAttrTest, AlternatePathFilledAndRearmed) {
  Connected c(/*with_alt=*/true);
  IbvQpAttr r = c.A(QpState::kRtr);
  ASSERT_TRUE(r.mask & IBV_QP_ALT_PATH);
  EXPECT_EQ(r.attr.alt_ah_attr.dlid, 12);
  EXPECT_EQ(r.attr.alt_ah_attr.sl, 5);
  EXPECT_EQ(r.attr.alt_ah_attr.port_num, 1);
  EXPECT_EQ(r.attr.alt_port_num, 1);
  EXPECT_EQ(r.attr.alt_pkey_index, 0);
  EXPECT_EQ(r.attr.alt_timeout, 18);
  EXPECT_EQ(r.attr.ah_attr.dlid, 2);  // primary unchanged
  IbvQpAttr s = c.A(QpState::kRts);
  EXPECT_TRUE(s.mask & IBV_QP_PATH_MIG_STATE);
  EXPECT_EQ(s.attr.path_mig_state, IBV_MIG_REARM);
  IbvQpAttr sb = c.B(QpState::kRtr);
  ASSERT_TRUE(sb.mask & IBV_QP_ALT_PATH);
  EXPECT_EQ(sb.attr.alt_ah_attr.dlid, 11);  // passive: the REQ sender's alt LID
  EXPECT_EQ(c.B(QpState::kRts).attr.path_mig_state, IBV_MIG_REARM);
}

TEST(ToIbvQpAttrTest, RoutedPathHasGrh) {
  Connected c(/*with_alt=*/false, /*routed=*/true);
  IbvMapOptions o;
  o.sgid_index = 3;
  IbvQpAttr r = *ToIbvQpAttr(*c.p.a.GetQpAttributes(c.a_id, QpState::kRtr), DataQpType::kRc, o);
  EXPECT_EQ(r.attr.ah_attr.is_global, 1);
  const mad::Gid want = mad::Gid::FromParts(0xfe80000000000000ull, cm::testing::kGuidB);
  EXPECT_EQ(std::memcmp(r.attr.ah_attr.grh.dgid.raw, want.raw.data(), 16), 0);
  EXPECT_EQ(r.attr.ah_attr.grh.flow_label, 0xABCDEu);
  EXPECT_EQ(r.attr.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(r.attr.ah_attr.grh.traffic_class, 0x20);
  EXPECT_EQ(r.attr.ah_attr.grh.sgid_index, 3);
}

TEST(ToIbvQpAttrTest, RoceLinkLayerIsAlwaysGlobal) {
  cm::QpAttributes a;
  a.state = QpState::kRtr;
  a.mask = cm::kQpState | cm::kQpAv | cm::kQpPathMtu | cm::kQpDestQpn | cm::kQpRqPsn;
  a.path_mtu = 3;
  a.av.is_global = true;  // what GetQpAttributes sets on an Ethernet port
  a.av.dgid.raw[10] = 0xFF;
  a.av.dgid.raw[11] = 0xFF;
  a.av.dgid.raw[15] = 7;
  IbvQpAttr r = *ToIbvQpAttr(a, DataQpType::kRc);
  EXPECT_EQ(r.attr.ah_attr.is_global, 1);
  EXPECT_EQ(r.attr.ah_attr.grh.dgid.raw[15], 7);
  EXPECT_EQ(r.attr.path_mtu, IBV_MTU_1024);
}

TEST(ToIbvQpAttrTest, LapRtsIsAltPathOnly) {
  cm::QpAttributes a;
  a.state = QpState::kRts;
  a.mask = cm::kQpAltPath | cm::kQpPathMigState;
  a.alt_av.dlid = 9;
  a.alt_av.timeout = 14;
  a.path_mig_rearm = true;
  IbvQpAttr r = *ToIbvQpAttr(a, DataQpType::kRc);
  EXPECT_EQ(r.mask, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE);
  EXPECT_EQ(r.attr.qp_state, IBV_QPS_RESET);  // not in the mask: stays 0
  EXPECT_EQ(r.attr.alt_ah_attr.dlid, 9);
  EXPECT_EQ(r.attr.alt_timeout, 14);
  EXPECT_EQ(r.attr.path_mig_state, IBV_MIG_REARM);
}

TEST(ToIbvQpAttrTest, OutOfRangeValuesNameTheField) {
  Connected c;
  auto rtr = *c.p.a.GetQpAttributes(c.a_id, QpState::kRtr);
  struct Case {
    const char* want;
    void (*edit)(cm::QpAttributes&);
  };
  const Case cases[] = {
      {"RTR: path_mtu code is 6; valid are 1 (256) .. 5 (4096)",
       [](cm::QpAttributes& a) { a.path_mtu = 6; }},
      {"RTR: path_mtu code is 0", [](cm::QpAttributes& a) { a.path_mtu = 0; }},
      {"RTR: dest_qpn is 16777216; the limit is 16777215",
       [](cm::QpAttributes& a) { a.dest_qpn = 1u << 24; }},
      {"RTR: rq_psn is 16777216", [](cm::QpAttributes& a) { a.rq_psn = 1u << 24; }},
      {"RTR: av.sl is 16; the limit is 15", [](cm::QpAttributes& a) { a.av.sl = 16; }},
      {"RTR: av.flow_label is 1048576", [](cm::QpAttributes& a) { a.av.flow_label = 1 << 20; }},
      {"RTR: min_rnr_timer is 32", [](cm::QpAttributes& a) { a.min_rnr_timer = 32; }},
      {"RTR: av.port_num is 0", [](cm::QpAttributes& a) { a.av.port_num = 0; }},
      {"RTR: mask bits SQ_PSN have no meaning for a move to RTR",
       [](cm::QpAttributes& a) { a.mask |= cm::kQpSqPsn; }},
  };
  for (const Case& k : cases) {
    cm::QpAttributes a = rtr;
    k.edit(a);
    absl::StatusOr<IbvQpAttr> r = ToIbvQpAttr(a, DataQpType::kRc);
    ASSERT_FALSE(r.ok()) << k.want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(k.want));
  }
  auto rts = *c.p.a.GetQpAttributes(c.a_id, QpState::kRts);
  rts.retry_cnt = 8;
  EXPECT_THAT(ToIbvQpAttr(rts, DataQpType::kRc).status().message(),
              HasSubstr("RTS: retry_cnt is 8; the limit is 7"));
  rts.retry_cnt = 7;
  rts.timeout = 32;
  EXPECT_THAT(ToIbvQpAttr(rts, DataQpType::kRc).status().message(),
              HasSubstr("RTS: timeout is 32; the limit is 31"));
  // UC does not take a timeout at all, so the same attributes map fine.
  EXPECT_TRUE(ToIbvQpAttr(rts, DataQpType::kUc).ok());
}

TEST(IbvMaskStringTest, NamesBits) {
  EXPECT_EQ(IbvMaskString(IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN), "STATE|AV|DEST_QPN");
  EXPECT_EQ(IbvMaskString(0), "0");
}

// ---- the verbs calls, with fakes ----

struct FakeVerbs {
  static inline int next_error = 0;
  static inline std::vector<int> masks;
  static inline std::vector<ibv_qp_state> states;
  static inline int attached = 0;
  static inline uint16_t last_mlid = 0;
  static int Modify(ibv_qp*, ibv_qp_attr* a, int mask) {
    masks.push_back(mask);
    states.push_back(a->qp_state);
    return next_error;
  }
  static int Attach(ibv_qp*, const ibv_gid*, uint16_t lid) {
    last_mlid = lid;
    ++attached;
    return next_error;
  }
  static int Detach(ibv_qp*, const ibv_gid*, uint16_t lid) {
    last_mlid = lid;
    --attached;
    return next_error;
  }
  static VerbsOps Ops() {
    next_error = 0;
    masks.clear();
    states.clear();
    attached = 0;
    return VerbsOps{&Modify, &Attach, &Detach};
  }
};

ibv_qp FakeQp(ibv_qp_type type, uint32_t qpn) {
  ibv_qp q;
  std::memset(&q, 0, sizeof q);
  q.qp_type = type;
  q.qp_num = qpn;
  return q;
}

TEST(VerbsQpTest, NoDeviceIsAClearError) {
  cm::QpAttributes a;
  a.mask = cm::kQpState;
  absl::Status s = ModifyQp(nullptr, a, DataQpType::kRc);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("modify QP to INIT: no QP (null ibv_qp"));
  EXPECT_THAT(TransitionToError(nullptr).message(), HasSubstr("modify QP to ERROR: no QP"));
  EXPECT_THAT(VerbsQp::Wrap(nullptr).status().message(), HasSubstr("null ibv_qp"));
  ibv_qp xrc = FakeQp(IBV_QPT_XRC_SEND, 5);
  EXPECT_THAT(VerbsQp::Wrap(&xrc).status().message(), HasSubstr("is not RC, UC or UD"));
}

TEST(VerbsQpTest, ModifyPassesTheMappedAttributes) {
  ibv_qp q = FakeQp(IBV_QPT_RC, 0x333);
  VerbsQp v = *VerbsQp::Wrap(&q, {}, FakeVerbs::Ops());
  EXPECT_EQ(v.qp_num(), 0x333u);
  EXPECT_EQ(v.type(), DataQpType::kRc);
  Connected c;
  for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
    ASSERT_TRUE(v.Modify(*c.p.a.GetQpAttributes(c.a_id, s)).ok());
  }
  ASSERT_TRUE(v.ToError().ok());
  EXPECT_THAT(FakeVerbs::states,
              ::testing::ElementsAre(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR));
  EXPECT_EQ(FakeVerbs::masks[1], c.A(QpState::kRtr).mask);
  EXPECT_EQ(FakeVerbs::masks[3], IBV_QP_STATE);
  EXPECT_EQ(v.counters().modifies, 4u);
  EXPECT_EQ(v.counters().modify_errors, 0u);
}

TEST(VerbsQpTest, ErrnoBecomesAMessageNamingStateAndAttributes) {
  ibv_qp q = FakeQp(IBV_QPT_RC, 0x333);
  VerbsQp v = *VerbsQp::Wrap(&q, {}, FakeVerbs::Ops());
  FakeVerbs::next_error = EINVAL;
  Connected c;
  absl::Status s = v.Modify(*c.p.a.GetQpAttributes(c.a_id, QpState::kRtr));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("ibv_modify_qp(RC QP 0x333 to RTR; mask STATE|AV|"));
  EXPECT_THAT(s.message(), HasSubstr("path_mtu 4, dest_qpn 0x222, dlid 2"));
  EXPECT_THAT(s.message(), HasSubstr("(errno 22)"));
  EXPECT_THAT(s.message(), HasSubstr("is the QP in the state before it?"));
  FakeVerbs::next_error = ENOMEM;
  EXPECT_THAT(v.ToError().message(), HasSubstr("QP 0x333 to ERROR; mask STATE): "));
  EXPECT_EQ(v.counters().modify_errors, 2u);
  // A mapping error never reaches the device.
  FakeVerbs::next_error = 0;
  const size_t calls = FakeVerbs::masks.size();
  cm::QpAttributes bad = *c.p.a.GetQpAttributes(c.a_id, QpState::kRtr);
  bad.path_mtu = 9;
  EXPECT_FALSE(v.Modify(bad).ok());
  EXPECT_EQ(FakeVerbs::masks.size(), calls);
}

TEST(VerbsQpTest, MulticastAttachOnlyOnUd) {
  ibv_qp rc = FakeQp(IBV_QPT_RC, 0x10);
  VerbsQp vrc = *VerbsQp::Wrap(&rc, {}, FakeVerbs::Ops());
  mad::Gid mgid;
  mgid.raw[0] = 0xFF;
  EXPECT_THAT(vrc.AttachMulticast(mgid, 0xC001).message(),
              HasSubstr("is RC; only UD QPs join multicast groups"));
  EXPECT_EQ(FakeVerbs::attached, 0);

  ibv_qp ud = FakeQp(IBV_QPT_UD, 0x11);
  VerbsQp v = *VerbsQp::Wrap(&ud, {}, FakeVerbs::Ops());
  ASSERT_TRUE(v.AttachMulticast(mgid, 0xC001).ok());
  EXPECT_EQ(FakeVerbs::attached, 1);
  EXPECT_EQ(FakeVerbs::last_mlid, 0xC001);
  ASSERT_TRUE(v.DetachMulticast(mgid, 0xC001).ok());
  EXPECT_EQ(FakeVerbs::attached, 0);
  FakeVerbs::next_error = EINVAL;
  EXPECT_THAT(v.AttachMulticast(mgid, 0xC002).message(),
              HasSubstr("ibv_attach_mcast(QP 0x11, MLID 0xc002): "));
  EXPECT_EQ(v.counters().attaches, 1u);
  EXPECT_EQ(v.counters().detaches, 1u);
  EXPECT_EQ(v.counters().mcast_errors, 1u);
}

}  // namespace
}  // namespace uscm::verbs
