// The fixture of the id tests: the simulated two-host fabric of
// api/c/uscm_sim_c.h with the drop-in on host 0 (10.0.0.1) as the process's
// backend and a peer through the uscm C API on host 1 (10.0.0.2). Events of
// the backend reach the program's channel through PumpEvents.
#ifndef USCM_API_LIBRDMACM_IDS_TESTING_H_
#define USCM_API_LIBRDMACM_IDS_TESTING_H_

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {

inline sockaddr_in Ipv4(const char* ip, uint16_t port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

inline std::string IpOf(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  }
  return text;
}

inline std::string DataOf(const void* data, size_t len) {
  return data == nullptr ? "" : std::string(static_cast<const char*>(data), len);
}

// A program's channel for fixtures that take the events their calls queued:
// non-blocking, so a get on an empty channel fails with EAGAIN instead of
// waiting. Null (and a test failure) if it cannot be made so.
inline rdma_event_channel* NewNonBlockingChannel() {
  rdma_event_channel* ch = NewEventChannel();
  if (ch == nullptr) return nullptr;
  if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) != 0) {
    ADD_FAILURE() << "O_NONBLOCK: " << strerror(errno);
    rdma_destroy_event_channel(ch);
    return nullptr;
  }
  return ch;
}

// Expects that the test took every event it caused, then destroys `ch`.
inline void DestroyDrainedChannel(rdma_event_channel* ch) {
  EXPECT_EQ(QueuedEvents(ch), 0) << "events left on the program's channel";
  rdma_destroy_event_channel(ch);
}

// The next event on the program's channel `ch`, expected to be `want`. When
// none is queued, `run_until(ready)` runs the fabric until `backend` (the
// port's uscm channel) has one, which PumpEvents brings over. Null, and a
// test failure, when none came.
template <typename RunUntil>
rdma_cm_event* NextPumpedEvent(rdma_event_channel* ch, uscm_event_channel* backend,
                               RunUntil run_until, rdma_cm_event_type want) {
  if (QueuedEvents(ch) == 0) {
    EXPECT_TRUE(run_until([backend] { return uscm_event_channel_queued(backend) > 0; }))
        << "no event; want " << rdma_event_str(want);
    EXPECT_GT(PumpEvents(), 0);
  }
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &e), 0) << strerror(errno);
  if (e != nullptr) {
    EXPECT_EQ(e->event, want) << rdma_event_str(e->event);
  }
  return e;
}

class IdsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sim_ = uscm_sim_create(13);
    ASSERT_NE(sim_, nullptr);
    ASSERT_EQ(UseDeviceForTesting(uscm_sim_device(sim_, 0)), 0) << strerror(errno);
    peer_ch_ = uscm_create_event_channel_on(uscm_sim_device(sim_, 1));
    ASSERT_NE(peer_ch_, nullptr);
  }
  static void TearDownTestSuite() {
    uscm_destroy_event_channel(peer_ch_);
    ResetBackendForTesting();
    uscm_sim_destroy(sim_);
  }

  void SetUp() override {
    ch_ = NewNonBlockingChannel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    SetDriverForTesting(nullptr, nullptr);
    for (uscm_cm_id* id : peer_ids_) EXPECT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
    DestroyDrainedChannel(ch_);
  }

  // The next event on the program's channel, running the fabric until the
  // backend has one when none is queued.
  rdma_cm_event* Next(rdma_cm_event_type want) {
    if (QueuedEvents(ch_) == 0) {
      EXPECT_EQ(uscm_sim_run_until_event(sim_, BackendChannel(), 120000), 0)
          << "no event for the drop-in; want " << rdma_event_str(want);
      EXPECT_GT(PumpEvents(), 0);
    }
    rdma_cm_event* e = nullptr;
    EXPECT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << rdma_event_str(e->event) << " status " << e->status;
    }
    return e;
  }

  uscm_cm_event* PeerNext(uscm_cm_event_type want) {
    EXPECT_EQ(uscm_sim_run_until_event(sim_, peer_ch_, 120000), 0)
        << "no event for the peer; want " << uscm_event_str(want);
    uscm_cm_event* e = nullptr;
    EXPECT_EQ(uscm_get_cm_event(peer_ch_, &e), 0) << uscm_last_error();
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << uscm_event_str(e->event) << " status " << e->status;
    }
    return e;
  }

  // rdma_resolve_addr of `id` to `dst`, then rdma_resolve_route, each event
  // taken and acked.
  void ResolveTo(rdma_cm_id* id, const void* dst) {
    EXPECT_EQ(rdma_resolve_addr(id, nullptr, static_cast<sockaddr*>(const_cast<void*>(dst)), 2000),
              0)
        << strerror(errno);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
  }

  // rdma_connect of `id` with the private data `data` (a string) and
  // `qp_num`; the peer's CONNECT_REQUEST, its private data checked.
  uscm_cm_event* ConnectToPeer(rdma_cm_id* id, const char* data, uint32_t qp_num) {
    rdma_conn_param param = {};
    param.private_data = data;
    param.private_data_len = static_cast<uint8_t>(strlen(data));
    param.qp_num = qp_num;
    EXPECT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
    uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
    if (pe != nullptr) {
      EXPECT_EQ(DataOf(pe->param.conn.private_data, strlen(data)), data);
    }
    return pe;
  }

  // The peer rejects the request `pe` with private data "no" and acks it;
  // the drop-in's REJECTED carries the "no". The passive id, for peer_ids_.
  uscm_cm_id* PeerRejectsWithNo(uscm_cm_event* pe) {
    uscm_cm_id* passive = pe->id;
    EXPECT_EQ(uscm_reject(passive, "no", 2), 0) << uscm_last_error();
    uscm_ack_cm_event(pe);
    rdma_cm_event* e = Next(RDMA_CM_EVENT_REJECTED);
    if (e != nullptr) {
      EXPECT_EQ(DataOf(e->param.conn.private_data, 2), "no");
      rdma_ack_cm_event(e);
    }
    return passive;
  }

  // A peer id of port space `ps` (and QP type `type`: USCM_QPT_UD for a
  // USCM_PS_IB id that connects by SIDR) on host 1 connected (REQ or
  // SIDR_REQ sent) to the drop-in at 10.0.0.1:port.
  uscm_cm_id* PeerConnect(uint16_t port, uint32_t qp_num, const char* data,
                          uscm_port_space ps = USCM_PS_TCP, uscm_qp_type type = USCM_QPT_RC) {
    uscm_cm_id* peer = nullptr;
    EXPECT_EQ(uscm_create_id(peer_ch_, &peer, nullptr, ps), 0);
    if (ps == USCM_PS_IB) {
      EXPECT_EQ(uscm_set_qp_type(peer, type), 0) << uscm_last_error();
    }
    uscm_addr dst;
    EXPECT_EQ(uscm_parse_addr(("10.0.0.1:" + std::to_string(port)).c_str(), &dst), 0);
    EXPECT_EQ(uscm_resolve_addr(peer, nullptr, &dst, 2000), 0) << uscm_last_error();
    uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ADDR_RESOLVED));
    EXPECT_EQ(uscm_resolve_route(peer, 2000), 0) << uscm_last_error();
    uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ROUTE_RESOLVED));
    uscm_conn_param p = {};
    p.private_data = data;
    p.private_data_len = static_cast<uint8_t>(strlen(data));
    p.responder_resources = 2;
    p.initiator_depth = 3;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    p.qp_num = qp_num;
    EXPECT_EQ(uscm_connect(peer, &p), 0) << uscm_last_error();
    return peer;
  }

  // A drop-in listener on 10.0.0.1:port.
  rdma_cm_id* Listen(uint16_t port, void* context) {
    rdma_cm_id* listener = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &listener, context, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in addr = Ipv4("10.0.0.1", port);
    EXPECT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&addr)), 0) << strerror(errno);
    EXPECT_EQ(listener->port_num, 1) << "bound to a device address: the id has its port";
    EXPECT_EQ(ntohs(rdma_get_src_port(listener)), port);
    EXPECT_EQ(rdma_listen(listener, 8), 0) << strerror(errno);
    return listener;
  }

  // For synchronous calls (SetDriverForTesting(Drive, this)): runs the
  // fabric a little, moves the backend's events, and answers for the peer:
  // CONNECT_REQUEST -> accept (QPN 0x77) or reject ("no"), CONNECT_RESPONSE
  // -> establish, DISCONNECTED -> disconnect (DREP); every peer event is acked, its passive ids
  // kept in peer_ids_.
  static void Drive(void* arg) {
    auto* t = static_cast<IdsTest*>(arg);
    if (++t->drive_steps_ > 20000) {
      fprintf(stderr, "Drive: no event for the waiting call after 1000 s of virtual time\n");
      abort();
    }
    uscm_sim_run_until_event(sim_, BackendChannel(), 50);
    PumpEvents();
    uscm_cm_event* pe = nullptr;
    while (uscm_get_cm_event(peer_ch_, &pe) == 0) {
      if (pe->event == USCM_CM_EVENT_CONNECT_REQUEST) {
        t->peer_ids_.push_back(pe->id);
        if (t->peer_rejects_) {
          EXPECT_EQ(uscm_reject(pe->id, "no", 2), 0) << uscm_last_error();
        } else {
          uscm_conn_param p = {};
          p.responder_resources = 1;
          p.initiator_depth = 1;
          p.qp_num = 0x77;
          EXPECT_EQ(uscm_accept(pe->id, &p), 0) << uscm_last_error();
        }
      } else if (pe->event == USCM_CM_EVENT_CONNECT_RESPONSE) {
        EXPECT_EQ(uscm_establish(pe->id), 0) << uscm_last_error();
      } else if (pe->event == USCM_CM_EVENT_DISCONNECTED) {
        uscm_disconnect(pe->id);  // the DREP, as a program answers DISCONNECTED
      }
      uscm_ack_cm_event(pe);
    }
  }

  static inline uscm_sim* sim_ = nullptr;
  static inline uscm_event_channel* peer_ch_ = nullptr;
  bool peer_rejects_ = false;
  int drive_steps_ = 0;
  std::vector<uscm_cm_id*> peer_ids_;
  rdma_event_channel* ch_ = nullptr;
};

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_IDS_TESTING_H_
