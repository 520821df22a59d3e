// Test helpers for the CM endpoint: two endpoints driven by handing the MADs
// one produces to the other, and virtual time jumped to the earliest deadline
// (quinn-proto Pair::drive). No simulator, no clock.
#ifndef USCM_CM_CM_TESTING_H_
#define USCM_CM_CM_TESTING_H_

#include <algorithm>
#include <functional>
#include <vector>

#include "cm/endpoint.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_common.h"

namespace uscm::cm::testing {

inline mad::wire::CmAttr AttrOf(const OutgoingMad& m) {
  return static_cast<mad::wire::CmAttr>(uint16_t{m.mad[16]} << 8 | m.mad[17]);
}

inline std::vector<OutgoingMad> DrainTx(CmEndpoint& e) {
  std::vector<OutgoingMad> v;
  OutgoingMad m;
  while (e.PollTransmit(&m)) v.push_back(m);
  return v;
}

inline std::vector<CmEvent> DrainEvents(CmEndpoint& e) {
  std::vector<CmEvent> v;
  CmEvent ev;
  while (e.PollEvent(&ev)) v.push_back(ev);
  return v;
}

inline std::vector<CmEventType> Types(const std::vector<CmEvent>& v) {
  std::vector<CmEventType> t;
  for (const CmEvent& e : v) t.push_back(e.type);
  return t;
}

inline mad::LocalPort MakePort(uint16_t lid, uint64_t guid) {
  mad::LocalPort p;
  p.ca_name = "test";
  p.lid = lid;
  p.node_guid = guid;
  p.gid = mad::Gid::FromParts(0xfe80000000000000ull, guid);
  p.pkeys = {0xFFFF};
  return p;
}

inline CmConfig TestConfig() {
  CmConfig c;
  c.timer_tick = mad::Duration::Nanos(1);  // deadlines exact to the ns
  return c;
}

inline constexpr uint64_t kGuidA = 0x0002c90300000a0aull;
inline constexpr uint64_t kGuidB = 0x0002c90300000b0bull;
inline constexpr uint64_t kService = 0x0000000001060000ull | 7471;

// Active side A (LID 1) connecting to passive side B (LID 2).
inline ConnectParams MakeConnect(uint32_t qpn = 0x111, uint32_t psn = 0x1234) {
  ConnectParams p;
  p.service_id = kService;
  p.primary.local_lid = 1;
  p.primary.remote_lid = 2;
  p.primary.local_gid = mad::Gid::FromParts(0xfe80000000000000ull, kGuidA);
  p.primary.remote_gid = mad::Gid::FromParts(0xfe80000000000000ull, kGuidB);
  p.primary.packet_life_time = 14;
  p.primary.local_ack_timeout = 15;
  p.primary.sl = 3;
  p.qpn = qpn;
  p.starting_psn = psn;
  p.responder_resources = 4;
  p.initiator_depth = 2;
  p.retry_count = 6;
  p.rnr_retry_count = 5;
  p.remote_cm_response_timeout = 16;
  p.local_cm_response_timeout = 17;
  p.max_cm_retries = 3;
  return p;
}

inline AcceptParams MakeAccept(uint32_t qpn = 0x222, uint32_t psn = 0x5678) {
  AcceptParams p;
  p.qpn = qpn;
  p.starting_psn = psn;
  p.responder_resources = 1;
  p.initiator_depth = 3;
  p.rnr_retry_count = 4;
  p.target_ack_delay = 10;
  return p;
}

struct Pair {
  Pair(CmConfig ca = TestConfig(), CmConfig cb = TestConfig())
      : port_a(MakePort(1, kGuidA)),
        port_b(MakePort(2, kGuidB)),
        a(port_a, ca, 1),
        b(port_b, cb, 2) {
    addr_a.lid = 1;
    addr_b.lid = 2;
  }

  // Returns true to drop the MAD (from_a: sent by A).
  std::function<bool(bool from_a, const OutgoingMad&)> drop;
  // Called for every event as it is drained, so a scenario can react.
  std::function<void(Pair&, bool side_a, const CmEvent&)> react;

  // Shuttles MADs and events until nothing is in flight.
  void Deliver() {
    for (;;) {
      bool moved = false;
      OutgoingMad m;
      while (a.PollTransmit(&m)) {
        moved = true;
        sent_by_a.push_back(m);
        if (!drop || !drop(true, m)) b.HandleMad(now, addr_a, m.mad);
      }
      while (b.PollTransmit(&m)) {
        moved = true;
        sent_by_b.push_back(m);
        if (!drop || !drop(false, m)) a.HandleMad(now, addr_b, m.mad);
      }
      CmEvent e;
      while (a.PollEvent(&e)) {
        moved = true;
        events_a.push_back(e);
        if (react) react(*this, true, e);
      }
      while (b.PollEvent(&e)) {
        moved = true;
        events_b.push_back(e);
        if (react) react(*this, false, e);
      }
      if (!moved) return;
    }
  }

  // One jump to the earliest deadline; false when neither side has one.
  bool Step() {
    Deliver();
    absl::optional<mad::TimePoint> next;
    for (CmEndpoint* e : {&a, &b}) {
      auto d = e->NextDeadline();
      if (d.has_value() && (!next.has_value() || *d < *next)) next = d;
    }
    if (!next.has_value()) return false;
    now = std::max(now, *next);
    a.HandleTimeout(now);
    b.HandleTimeout(now);
    Deliver();
    return true;
  }

  // Runs until no deadline is left; fails the test after max_steps (livelock).
  void Drive(int max_steps = 10000) {
    int steps = 0;
    while (Step()) {
      if (++steps >= max_steps) {
        ADD_FAILURE() << "Pair::Drive did not settle in " << max_steps << " steps";
        return;
      }
    }
  }

  void ExpectAllTablesEmpty() {
    for (CmEndpoint* e : {&a, &b}) {
      EXPECT_EQ(e->connection_count(), 0u);
      EXPECT_EQ(e->table_entries(), 0u);
      EXPECT_TRUE(e->timers_empty());
    }
  }

  mad::LocalPort port_a, port_b;
  CmEndpoint a, b;
  mad::MadAddress addr_a, addr_b;  // how each side sees the other's MADs arrive
  mad::TimePoint now = mad::TimePoint::Epoch();
  std::vector<CmEvent> events_a, events_b;
  std::vector<OutgoingMad> sent_by_a, sent_by_b;
};

}  // namespace uscm::cm::testing

#endif  // USCM_CM_CM_TESTING_H_
