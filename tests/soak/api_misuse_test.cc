// API-level misuse (issue 8): every wrong use of the C API (api/c/uscm_cma.h)
// in a table — NULL and foreign handles, bad lengths and values, calls in the
// wrong state on listeners, active, passive and established ids — each with
// the exact errno and message it must give, and the proof that a refused
// call changed nothing: no MAD sent by either CM, no event queued, the id
// still works afterwards (the test finishes the connection and every table
// is empty). docs/RELIABILITY.md "API misuse" lists the same rows.
//
// The C API is a thin layer over the C++ one (api/rdma_cm/rdma_cm.h); a C++ row for
// each state error is in api/rdma_cm/rdma_cm_test.cc MisuseErrorsNameTheProblem.
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/time.h"

namespace uscm {
namespace {

// One misuse: the call, the errno and the start of uscm_last_error().
struct Row {
  std::string what;
  std::function<int()> call;
  int err;
  std::string message;  // uscm_last_error() must start with this
};

class ApiMisuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = testing::SimFabric::Create(/*seed=*/17);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    for (int h = 0; h < 2; ++h) dev_[h] = uscm_device_wrap(fabric_->host(h).device.get());
    ch_a_ = uscm_create_event_channel_on(dev_[0]);
    ch_b_ = uscm_create_event_channel_on(dev_[1]);
    ASSERT_NE(ch_a_, nullptr);
    ASSERT_NE(ch_b_, nullptr);
    ASSERT_EQ(uscm_parse_addr("10.0.0.2:7471", &server_), 0);
  }
  void TearDown() override {
    uscm_destroy_event_channel(ch_a_);
    uscm_destroy_event_channel(ch_b_);
    for (uscm_device* d : dev_) uscm_device_unwrap_free(d);
  }

  Device& Dev(int host) { return *fabric_->host(host).device; }
  uint64_t Sent(int host) {
    const cm::CmCounters& c = Dev(host).node().cm().counters();
    uint64_t n = 0;
    for (uint64_t s : c.sent) n += s;
    return n;
  }

  // Runs virtual time until `ch` has an event or `ms` pass; true if one came.
  bool RunUntilEvent(uscm_event_channel* ch, int ms) {
    auto readable = [ch] {
      pollfd p{ch->fd, POLLIN, 0};
      return poll(&p, 1, 0) == 1;
    };
    sim::Scheduler& s = fabric_->scheduler();
    return s.RunUntil(readable, s.Now() + mad::Duration::Millis(ms)).ok();
  }

  // Runs every row: -1, the errno, the message; nothing sent, no event.
  void Check(const std::vector<Row>& rows) {
    for (const Row& r : rows) {
      const uint64_t sent0 = Sent(0), sent1 = Sent(1);
      errno = 0;
      const int rc = r.call();
      const int err = errno;
      const std::string msg = uscm_last_error();
      // The table of docs/RELIABILITY.md ("API misuse") is this output.
      printf("| %s | %s | %s |\n", r.what.c_str(), strerrorname_np(err), msg.c_str());
      EXPECT_EQ(rc, -1) << r.what;
      EXPECT_EQ(err, r.err) << r.what << ": errno " << strerror(err) << ", " << msg;
      EXPECT_EQ(msg.substr(0, r.message.size()), r.message) << r.what;
      // Let the simulation run: a refused call must not have queued a send.
      EXPECT_FALSE(RunUntilEvent(ch_a_, 50)) << r.what << ": event on A";
      EXPECT_FALSE(RunUntilEvent(ch_b_, 50)) << r.what << ": event on B";
      EXPECT_EQ(Sent(0), sent0) << r.what;
      EXPECT_EQ(Sent(1), sent1) << r.what;
    }
  }

  uscm_cm_event* Next(uscm_event_channel* ch, uscm_cm_event_type want) {
    uscm_cm_event* e = nullptr;
    EXPECT_TRUE(RunUntilEvent(ch, 120000)) << uscm_event_str(want);
    EXPECT_EQ(uscm_get_cm_event(ch, &e), 0);
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << uscm_event_str(e->event);
    }
    return e;
  }
  void Ack(uscm_event_channel* ch, uscm_cm_event_type want) {
    uscm_cm_event* e = Next(ch, want);
    if (e != nullptr) {
      EXPECT_EQ(uscm_ack_cm_event(e), 0);
    }
  }

  std::unique_ptr<testing::SimFabric> fabric_;
  uscm_device* dev_[2] = {nullptr, nullptr};
  uscm_event_channel* ch_a_ = nullptr;
  uscm_event_channel* ch_b_ = nullptr;
  uscm_addr server_{};
};

TEST_F(ApiMisuseTest, EveryMisuseGivesItsErrorAndChangesNothing) {
  uscm_cm_id* listener = nullptr;
  ASSERT_EQ(uscm_create_id(ch_b_, &listener, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_bind_addr(listener, &server_), 0);
  ASSERT_EQ(uscm_listen(listener, 4), 0);
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_a_, &id, nullptr, USCM_PS_TCP), 0);
  uscm_cm_id bogus{};
  bogus.impl = &bogus;  // a handle the library never made
  uscm_conn_param big{};
  static uint8_t data[256];
  big.private_data = data;
  uscm_addr addr{};
  uscm_qp_attr qp_attr{};
  int mask = 0;
  int one = 1;
  uscm_cm_event* ev = nullptr;

  Check({
      // NULL and foreign handles.
      {"create_id(NULL channel)", [&] { return uscm_create_id(nullptr, &id, nullptr, USCM_PS_TCP); },
       EINVAL, "create_id: channel and id must not be NULL"},
      {"create_id(bad port space)",
       [&] {
         uscm_cm_id* x = nullptr;
         return uscm_create_id(ch_a_, &x, nullptr, static_cast<uscm_port_space>(7));
       },
       EINVAL, "create_id: port space 0x7 is not one of RDMA_PS_TCP 0x106, RDMA_PS_UDP 0"},
      {"connect(NULL id)", [&] { return uscm_connect(nullptr, nullptr); }, EINVAL,
       "connect: id is NULL"},
      {"destroy_id(NULL)", [&] { return uscm_destroy_id(nullptr); }, EINVAL,
       "destroy_id: id is NULL"},
      {"destroy_id(foreign handle)", [&] { return uscm_destroy_id(&bogus); }, EINVAL,
       "destroy_id: unknown id"},
      {"listen(foreign handle)", [&] { return uscm_listen(&bogus, 1); }, EINVAL,
       "listen: unknown id"},
      {"bind_addr(NULL addr)", [&] { return uscm_bind_addr(id, nullptr); }, EINVAL, "bind_addr: address is NULL"},
      {"resolve_addr(NULL dst)", [&] { return uscm_resolve_addr(id, nullptr, nullptr, 100); },
       EINVAL, "resolve_addr: address is NULL"},
      {"set_local_ece(NULL)", [&] { return uscm_set_local_ece(id, nullptr); }, EINVAL,
       "set_local_ece: ece is NULL"},
      {"get_remote_ece(NULL)", [&] { return uscm_get_remote_ece(id, nullptr); }, EINVAL,
       "get_remote_ece: ece is NULL"},
      {"set_option(NULL optval)", [&] { return uscm_set_option(id, 0, 0, nullptr, 4); }, EINVAL,
       "set_option: optval is NULL"},
      {"set_option(unknown option)", [&] { return uscm_set_option(id, 99, 99, &one, sizeof one); },
       ENOSYS, "set_option: unknown option (level 99, option 99)"},
      {"init_qp_attr(NULL)", [&] { return uscm_init_qp_attr(id, nullptr, &mask); }, EINVAL,
       "init_qp_attr: attr/mask NULL"},
      {"get_cm_event(NULL)", [&] { return uscm_get_cm_event(ch_a_, nullptr); }, EINVAL,
       "get_cm_event: channel and event must not be NULL"},
      {"get_cm_event(empty)", [&] { return uscm_get_cm_event(ch_a_, &ev); }, EAGAIN, "get_cm_event: no event queued; wait until fd() is readable"},
      {"ack_cm_event(NULL)", [&] { return uscm_ack_cm_event(nullptr); }, EINVAL,
       "ack_cm_event: event is NULL"},
      {"getname(NULL)", [&] { return uscm_getname(id, nullptr); }, EINVAL,
       "getname: addr is NULL"},
      {"getpeer(NULL)", [&] { return uscm_getpeer(id, nullptr); }, EINVAL,
       "getpeer: addr is NULL"},
      {"parse_addr(NULL)", [&] { return uscm_parse_addr(nullptr, &addr); }, EINVAL,
       "parse_addr: NULL argument"},
      {"parse_addr(garbage)", [&] { return uscm_parse_addr("10.0.0.300:1", &addr); }, EINVAL, "address '10.0.0.300:1' is neither IPv4 nor IPv6 (AF_IB: use Address::Ib)"},
      // Wrong state on a fresh (IDLE) id.
      {"connect before resolve_route", [&] { return uscm_connect(id, nullptr); }, EINVAL,
       "connect: id is in state IDLE; expected ROUTE_RESOLVED"},
      {"resolve_route before resolve_addr", [&] { return uscm_resolve_route(id, 100); }, EINVAL,
       ""},
      {"listen before bind_addr", [&] { return uscm_listen(id, 1); }, EINVAL, "listen: id is in state IDLE; expected IDLE and bound (bind_addr first)"},
      {"accept on an active id", [&] { return uscm_accept(id, nullptr); }, EINVAL, "accept: id is in state IDLE; expected CONNECT_REQUEST"},
      {"reject on an active id", [&] { return uscm_reject(id, nullptr, 0); }, EINVAL,
       "reject: id is in state IDLE"},
      {"establish before a response", [&] { return uscm_establish(id); }, EINVAL, "establish: id is in state IDLE; expected CONNECT_RESPONSE (an id without"},
      {"disconnect before connect", [&] { return uscm_disconnect(id); }, EINVAL,
       "disconnect: id is in state IDLE"},
      {"join_multicast on an RC id", [&] { return uscm_join_multicast(id, &server_, nullptr); },
       EINVAL, "join_multicast: only UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB, a UD RDMA_PS_IB id) "
       "join groups"},
      {"init_qp_attr bad state",
       [&] {
         qp_attr.qp_state = static_cast<uscm_qp_state>(0);
         return uscm_init_qp_attr(id, &qp_attr, &mask);
       },
       EINVAL, "init_qp_attr: attr->qp_state must be USCM_QPS_INIT, _RTR or _RTS"},
      // Listener misuse.
      {"listen twice", [&] { return uscm_listen(listener, 4); }, EINVAL, "listen: id is in state LISTEN; expected IDLE and bound (bind_addr first)"},
      {"bind a second id to the listening address",
       [&] {
         uscm_cm_id* x = nullptr;
         uscm_create_id(ch_b_, &x, nullptr, USCM_PS_TCP);
         const int rc = uscm_bind_addr(x, &server_);
         const int e = errno;
         uscm_destroy_id(x);
         errno = e;
         return rc;
       },
       EADDRINUSE, "bind_addr: 10.0.0.2:7471 is in use in this port space (errno EADDRINUSE); "},
      {"connect on a listener", [&] { return uscm_connect(listener, nullptr); }, EINVAL, "connect: id is in state LISTEN; expected ROUTE_RESOLVED"},
      {"accept on a listener", [&] { return uscm_accept(listener, nullptr); }, EINVAL, "accept: id is in state LISTEN; expected CONNECT_REQUEST"},
      {"disconnect a listener", [&] { return uscm_disconnect(listener); }, EINVAL, "disconnect: id is in state LISTEN; expected ESTABLISHED (RC), or DISCONN"},
  });

  // Resolved active id: too much private data, connect twice.
  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0);
  Ack(ch_a_, USCM_CM_EVENT_ADDR_RESOLVED);
  Check({{"resolve_addr twice", [&] { return uscm_resolve_addr(id, nullptr, &server_, 2000); },
          EINVAL, "resolve_addr: id is in state ADDR_RESOLVED; expected IDLE"}});
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0);
  Ack(ch_a_, USCM_CM_EVENT_ROUTE_RESOLVED);
  Check({
      {"connect with 57 bytes (TCP: 56 after the CMA header)",
       [&] {
         big.private_data_len = 57;
         return uscm_connect(id, &big);
       },
       EINVAL, "connect: private data is 57 bytes; REQ with the 36-byte CMA header carries at most 56"},
      {"connect with data NULL but length 8",
       [&] {
         uscm_conn_param p{};
         p.private_data_len = 8;
         return uscm_connect(id, &p);
       },
       EINVAL, "connect: private_data is NULL but private_data_len is 8"},
  });
  uscm_conn_param cp{};
  cp.qp_num = 0x77;
  ASSERT_EQ(uscm_connect(id, &cp), 0);
  uscm_cm_event* req = Next(ch_b_, USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  uscm_cm_id* child = req->id;
  Check({{"connect twice", [&] { return uscm_connect(id, &cp); }, EINVAL,
          "connect: id is in state CONNECT; expected ROUTE_RESOLVED"},
         {"resolve_route while connecting", [&] { return uscm_resolve_route(id, 100); }, EINVAL,
          "resolve_route: id is in state CONNECT; expected ADDR_RESOLVED"}});

  // The passive id: destroy with an unacked event, too much data, accept
  // twice, reject after accept.
  Check({
      {"destroy_id with its event not acked", [&] { return uscm_destroy_id(child); }, EBUSY, "destroy_id: 1 retrieved event(s) of this id are not acked; ack_cm_event "},
      {"accept with 197 bytes (REP: 196)",
       [&] {
         big.private_data_len = 197;
         return uscm_accept(child, &big);
       },
       EINVAL, "accept: private data is 197 bytes; REP carries at most 196"},
      {"reject with 149 bytes (REJ: 148)",
       [&] { return uscm_reject(child, data, 149); }, EINVAL, "reject: private data is 149 bytes; REJ carries at most 148"},
      {"reject with data NULL but length 4", [&] { return uscm_reject(child, nullptr, 4); },
       EINVAL, "reject: private_data is NULL but private_data_len is 4"},
      {"accept with data NULL but length 4",
       [&] {
         uscm_conn_param p{};
         p.private_data_len = 4;
         return uscm_accept(child, &p);
       },
       EINVAL, "accept: private_data is NULL but private_data_len is 4"},
  });
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  cp.qp_num = 0x88;
  ASSERT_EQ(uscm_accept(child, &cp), 0);
  // No QP attached: the active side gets CONNECT_RESPONSE and calls
  // establish (librdmacm's rdma_establish), which sends the RTU.
  Ack(ch_a_, USCM_CM_EVENT_CONNECT_RESPONSE);
  Check({{"accept twice", [&] { return uscm_accept(child, &cp); }, EINVAL,
          "accept: id is in state ACCEPTED; expected CONNECT_REQUEST"},
         {"reject after accept", [&] { return uscm_reject(child, nullptr, 0); }, EINVAL,
          "reject: id is in state ACCEPTED; expected CONNECT_REQUEST or CONNECT_RESPONSE"}});
  ASSERT_EQ(uscm_establish(id), 0);
  Ack(ch_b_, USCM_CM_EVENT_ESTABLISHED);
  Check({{"connect on an established id", [&] { return uscm_connect(id, &cp); }, EINVAL,
          "connect: id is in state ESTABLISHED; expected ROUTE_RESOLVED"},
         {"accept on an established id", [&] { return uscm_accept(child, &cp); }, EINVAL,
          "accept: id is in state ESTABLISHED; expected CONNECT_REQUEST"},
         {"reject on an established id", [&] { return uscm_reject(id, nullptr, 0); }, EINVAL,
          "reject: id is in state ESTABLISHED; expected CONNECT_REQUEST or CONNECT_RESPONSE"},
         {"establish twice", [&] { return uscm_establish(id); }, EINVAL,
          "establish: id is in state ESTABLISHED; expected CONNECT_RESPONSE"}});

  // The refused calls changed nothing: the connection closes normally.
  ASSERT_EQ(uscm_disconnect(id), 0);
  Ack(ch_b_, USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_disconnect(child), 0);
  Ack(ch_a_, USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_destroy_id(child), 0);
  ASSERT_EQ(uscm_destroy_id(id), 0);
  ASSERT_EQ(uscm_destroy_id(listener), 0);
  fabric_->RunFor(mad::Duration::Seconds(300));  // past TimeWait
  for (int h = 0; h < 2; ++h) {
    Device& d = Dev(h);
    EXPECT_EQ(d.id_count(), 0u) << "host " << h;
    EXPECT_EQ(d.node().cm().connection_count(), 0u) << "host " << h;
    EXPECT_EQ(d.node().cm().listener_count(), 0u) << "host " << h;
  }
}

}  // namespace
}  // namespace uscm
