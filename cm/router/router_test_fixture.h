// The router in process on a simulated fabric, with in-memory clients: each
// client is a CmEndpoint whose MADs go through Router::HandleFrame and whose
// frames come back through the sink. The peer on the other host is a plain
// CmEndpoint. Virtual time only; every scenario ends with empty tables.
// Shared by router_test.cc and router_listen_address_test.cc.
#ifndef USCM_CM_ROUTER_ROUTER_TEST_FIXTURE_H_
#define USCM_CM_ROUTER_ROUTER_TEST_FIXTURE_H_

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "cm/cm_testing.h"
#include "cm/endpoint.h"
#include "cm/router/router.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/wire/cm_message.h"

namespace uscm::router {

namespace w = mad::wire;
using cm::CmEndpoint;
using cm::CmEvent;
using cm::CmEventType;
using cm::ConnId;

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;
constexpr uint16_t kRouterLid = 2;  // host1 (TwoHostsOneSwitch)
constexpr uint16_t kPeerLid = 3;    // host2

inline uint64_t TotalReceived(const CmEndpoint& e) {
  uint64_t n = 0;
  for (uint64_t v : e.counters().received) n += v;
  return n;
}

struct TestClient {
  uint8_t slot = 0;
  std::unique_ptr<CmEndpoint> cm;
  std::deque<std::vector<uint8_t>> inbox;  // frames from the router
  std::vector<absl::Status> refused;
  std::vector<ReplyFrame> replies;
  std::vector<CmEvent> events;
};

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<sim::Scheduler>(7);
    auto f = sim::Fabric::Create(*sched_, sim::TwoHostsOneSwitch());
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    wire_ = *fabric_->Open("host1");
    peer_tx_ = *fabric_->Open("host2");
    router_ = std::make_unique<Router>(*wire_, router_options_,
                                       [this](uint8_t slot, std::span<const uint8_t> f) {
                                         clients_.at(slot).inbox.emplace_back(f.begin(), f.end());
                                       });
    peer_ = std::make_unique<CmEndpoint>(peer_tx_->port(), cm::testing::TestConfig(), 99);
  }

  RouterOptions router_options_;  // a fixture's constructor may change them

  TestClient& AddClient(const ClientCredentials& creds = {}) {
    auto wl = router_->AddClient(creds);
    EXPECT_TRUE(wl.ok()) << wl.status();
    TestClient& c = clients_[wl->slot];
    c.slot = wl->slot;
    cm::CmConfig cfg = cm::testing::TestConfig();
    cfg.comm_id_prefix_bits = wl->comm_id_prefix_bits;
    cfg.comm_id_prefix = wl->comm_id_prefix;
    c.cm = std::make_unique<CmEndpoint>(wl->port, cfg, 100 + wl->slot);
    return c;
  }

  void Crash(TestClient& c) {
    router_->RemoveClient(c.slot);
    c.cm.reset();
    c.inbox.clear();
  }

  void SendFrame(TestClient& c, const mad::MadAddress& to, std::span<const uint8_t> mad) {
    std::vector<uint8_t> f;
    EncodeMad(to, mad, &f);
    router_->HandleFrame(c.slot, f);
  }

  absl::Status Claim(TestClient& c, uint64_t sid, uint64_t mask, bool reuse,
                     const mad::ListenAddress& address = {},
                     mad::ClaimKind kind = mad::ClaimKind::kListen) {
    router_->HandleFrame(
        c.slot, EncodeClaim(FrameType::kClaim, ClaimFrame{1, sid, mask, reuse, address, kind}));
    Deliver();
    EXPECT_FALSE(c.replies.empty());
    if (c.replies.empty()) return absl::InternalError("no reply");
    absl::Status s = c.replies.back().status;
    c.replies.clear();
    return s;
  }

  // Moves MADs and frames until nothing moves (no virtual time passes except
  // the fabric's delivery delay).
  void Deliver() {
    for (int round = 0; round < 1000; ++round) {
      bool moved = false;
      const mad::TimePoint now = sched_->Now();
      for (auto& [slot, c] : clients_) {
        if (!c.cm) continue;
        cm::OutgoingMad m;
        while (c.cm->PollTransmit(&m)) {
          moved = true;
          SendFrame(c, m.to, m.mad);
        }
      }
      cm::OutgoingMad m;
      while (peer_->PollTransmit(&m)) {
        moved = true;
        peer_sent_.push_back(m);
        ASSERT_TRUE(peer_tx_->Send(m.to, m.mad).ok());
      }
      ASSERT_TRUE(sched_->RunUntilIdle().ok());
      if (router_->PollWire() > 0) moved = true;
      peer_tx_->Drain([&](const mad::ReceivedMad& r) {
        moved = true;
        peer_rx_.emplace_back(r.data.begin(), r.data.end());
        peer_->HandleMad(sched_->Now(), r.from, r.data);
      });
      for (auto& [slot, c] : clients_) {
        while (!c.inbox.empty()) {
          moved = true;
          std::vector<uint8_t> f = std::move(c.inbox.front());
          c.inbox.pop_front();
          auto type = PeekFrame(f);
          ASSERT_TRUE(type.ok());
          if (*type == FrameType::kMad) {
            auto mf = DecodeMad(f);
            ASSERT_TRUE(mf.ok());
            if (c.cm) c.cm->HandleMad(sched_->Now(), mf->address, mf->mad);
          } else if (*type == FrameType::kRefused) {
            c.refused.push_back(DecodeRefused(f)->why);
          } else if (*type == FrameType::kReply) {
            c.replies.push_back(*DecodeReply(f));
          }
        }
        CmEvent e;
        while (c.cm && c.cm->PollEvent(&e)) {
          moved = true;
          c.events.push_back(e);
          if (e.type == CmEventType::kConnectResponse) {
            ASSERT_TRUE(c.cm->Rtu(now, e.conn).ok());
          } else if (e.type == CmEventType::kConnectRequest && accept_on_clients_) {
            ASSERT_TRUE(c.cm->Accept(now, e.conn, cm::testing::MakeAccept(next_qpn_++)).ok());
          } else if (e.type == CmEventType::kSidrRequest && accept_on_clients_) {
            cm::SidrReplyParams rp;
            rp.qpn = 0x6000u + slot;  // tells the peer which client answered
            rp.qkey = 0x01234567;
            ASSERT_TRUE(c.cm->SidrReply(now, e.conn, rp).ok());
            ASSERT_TRUE(c.cm->Destroy(now, e.conn).ok());  // as rdma_cm after the reply
          }
        }
      }
      CmEvent e;
      while (peer_->PollEvent(&e)) {
        moved = true;
        peer_events_.push_back(e);
        if (e.type == CmEventType::kConnectRequest && accept_on_peer_) {
          ASSERT_TRUE(peer_->Accept(now, e.conn, cm::testing::MakeAccept(next_qpn_++)).ok());
        } else if (e.type == CmEventType::kConnectResponse && rtu_on_peer_) {
          ASSERT_TRUE(peer_->Rtu(now, e.conn).ok());
        } else if (e.type == CmEventType::kDisconnected || e.type == CmEventType::kRejected ||
                   e.type == CmEventType::kUnreachable || e.type == CmEventType::kSidrReply) {
          // An rdma_cm user destroys the id: DREP for a DREQ, then TimeWait.
          ASSERT_TRUE(peer_->Destroy(now, e.conn).ok());
        }
      }
      if (!moved) return;
    }
    ADD_FAILURE() << "Deliver did not settle";
  }

  // Jumps to the earliest CM deadline until none is left.
  void Drive(int max_steps = 10000) {
    for (int i = 0; i < max_steps; ++i) {
      Deliver();
      absl::optional<mad::TimePoint> next = peer_->NextDeadline();
      for (auto& [slot, c] : clients_) {
        if (!c.cm) continue;
        auto d = c.cm->NextDeadline();
        if (d.has_value() && (!next.has_value() || *d < *next)) next = d;
      }
      if (!next.has_value()) return;
      if (*next > sched_->Now()) {
        ASSERT_TRUE(sched_->RunFor(*next - sched_->Now()).ok());
      }
      peer_->HandleTimeout(sched_->Now());
      for (auto& [slot, c] : clients_) {
        if (c.cm) c.cm->HandleTimeout(sched_->Now());
      }
    }
    ADD_FAILURE() << "Drive did not settle in " << max_steps << " steps";
  }

  cm::ConnectParams ToPeer(uint32_t qpn) const {
    cm::ConnectParams p = cm::testing::MakeConnect(qpn);
    p.service_id = kSid;
    p.primary.local_lid = kRouterLid;
    p.primary.remote_lid = kPeerLid;
    p.primary.local_gid = wire_->port().gid;
    p.primary.remote_gid = peer_tx_->port().gid;
    p.primary.local_ack_timeout = 10;
    p.remote_cm_response_timeout = 10;
    p.local_cm_response_timeout = 10;
    return p;
  }
  cm::ConnectParams ToRouterHost(uint64_t sid, uint32_t qpn) const {
    cm::ConnectParams p = ToPeer(qpn);
    p.service_id = sid;
    p.primary.local_lid = kPeerLid;
    p.primary.remote_lid = kRouterLid;
    std::swap(p.primary.local_gid, p.primary.remote_gid);
    return p;
  }

  static int Count(const std::vector<CmEvent>& v, CmEventType t) {
    int n = 0;
    for (const CmEvent& e : v) n += e.type == t;
    return n;
  }

  void ExpectAllEmpty() {
    EXPECT_EQ(peer_->connection_count(), 0u);
    EXPECT_EQ(peer_->table_entries(), 0u);
    for (auto& [slot, c] : clients_) {
      if (!c.cm) continue;
      EXPECT_EQ(c.cm->connection_count(), 0u) << "slot " << int{slot};
      EXPECT_EQ(router_->tracked(slot), 0u) << "slot " << int{slot};
    }
  }

  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sim::SimTransport> wire_, peer_tx_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<CmEndpoint> peer_;
  std::map<uint8_t, TestClient> clients_;
  std::vector<CmEvent> peer_events_;
  bool accept_on_clients_ = true;
  bool accept_on_peer_ = true;
  std::vector<std::vector<uint8_t>> peer_rx_;  // every MAD the peer received
  std::vector<cm::OutgoingMad> peer_sent_;     // every MAD the peer sent
  bool rtu_on_peer_ = true;
  uint32_t next_qpn_ = 0x5000;  // every accepted connection gets its own QPN
};

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_ROUTER_TEST_FIXTURE_H_
