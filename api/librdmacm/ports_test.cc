// The drop-in on two ports at once: both hosts of the simulated fabric
// (api/c/uscm_sim_c.h) are this process's ports, host 0 (10.0.0.1) port 1
// and host 1 (10.0.0.2) port 2. An id goes to the port of the address it
// binds or resolves from; a wildcard listener is reached through both; each
// CONNECT_REQUEST's id carries the port it arrived on.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "api/librdmacm/ports.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

Addr16 V4(const char* ip) {
  Addr16 a{};
  a[10] = a[11] = 0xff;
  inet_pton(AF_INET, ip, &a[12]);
  return a;
}

class PortsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sim_ = uscm_sim_create(21);
    ASSERT_NE(sim_, nullptr);
    ASSERT_EQ(UseDevicesForTesting({uscm_sim_device(sim_, 0), uscm_sim_device(sim_, 1)},
                                   {{V4("10.0.0.1")}, {V4("10.0.0.2")}}),
              0)
        << strerror(errno);
  }
  static void TearDownTestSuite() {
    ResetBackendForTesting();
    uscm_sim_destroy(sim_);
  }
  void SetUp() override {
    ch_ = NewNonBlockingChannel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override { DestroyDrainedChannel(ch_); }

  // The next event on the program's channel, running the fabric (both
  // ports) until one arrives; bounded.
  rdma_cm_event* Next(rdma_cm_event_type want) {
    for (int step = 0; step < 4000 && QueuedEvents(ch_) == 0; ++step) {
      for (uscm_event_channel* c : PortChannelsForTesting()) uscm_sim_run_until_event(sim_, c, 50);
      PumpEvents();
    }
    rdma_cm_event* e = nullptr;
    EXPECT_EQ(rdma_get_cm_event(ch_, &e), 0) << "no event; want " << rdma_event_str(want);
    if (e != nullptr) {
      EXPECT_EQ(e->event, want) << rdma_event_str(e->event) << " status " << e->status;
    }
    return e;
  }

  // A client from `src` to `dst`:`port` up to its REQ (connect with a QPN of
  // its own); checks it resolved on `want_port`.
  rdma_cm_id* Connect(const char* src, const char* dst, uint16_t port, int want_port) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    EXPECT_EQ(id->port_num, 0) << "no device before an address";
    sockaddr_in s = Ipv4(src, 0), d = Ipv4(dst, port);
    EXPECT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&s), reinterpret_cast<sockaddr*>(&d),
                                2000),
              0)
        << strerror(errno);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT_EQ(id->port_num, want_port) << "the port of the source address " << src;
    EXPECT_EQ(IpOf(&id->route.addr.src_addr), src);
    EXPECT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
    rdma_conn_param p = {};
    p.qp_num = 0x55;
    p.retry_count = 7;
    EXPECT_EQ(rdma_connect(id, &p), 0) << strerror(errno);
    return id;
  }

  static inline uscm_sim* sim_ = nullptr;
  rdma_event_channel* ch_ = nullptr;
};

TEST_F(PortsTest, BindTakesThePortOfTheAddress) {
  for (auto [ip, port] : {std::pair{"10.0.0.2", 2}, std::pair{"10.0.0.1", 1}}) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in a = Ipv4(ip, 7300);
    ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), 0) << ip << ": " << strerror(errno);
    EXPECT_EQ(id->port_num, port) << ip;
    EXPECT_EQ(IpOf(&id->route.addr.src_addr), ip);
    EXPECT_EQ(ntohs(rdma_get_src_port(id)), 7300);
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
  // An address of neither port: the id stays where it is and uscm refuses.
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in a = Ipv4("10.0.0.9", 7300);
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), -1);
  EXPECT_EQ(id->port_num, 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// Options set before the id has a port go with it to the port it moves to:
// the TOS shows as the path's traffic class.
TEST_F(PortsTest, OptionsFollowTheIdToItsPort) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  // A bad option fails at once, as librdmacm's (checked by uscm), though the
  // id has no port yet.
  int wide = 0x20;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &wide, sizeof(wide)), -1);
  EXPECT_EQ(errno, EINVAL);
  uint8_t tos = 0x68;
  ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)), 0)
      << strerror(errno);
  sockaddr_in s = Ipv4("10.0.0.2", 0), d = Ipv4("10.0.0.1", 7301);
  ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&s), reinterpret_cast<sockaddr*>(&d),
                              2000),
            0)
      << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
  EXPECT_EQ(id->port_num, 2);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
  ASSERT_NE(id->route.path_rec, nullptr);
  EXPECT_EQ(id->route.path_rec->traffic_class, 0x68);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(PortsTest, WildcardListenerIsReachedThroughEveryPort) {
  int ctx = 0;
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &listener, &ctx, RDMA_PS_TCP), 0);
  sockaddr_in any = Ipv4("0.0.0.0", 7400);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&any)), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(listener, 8), 0) << strerror(errno);
  EXPECT_EQ(listener->port_num, 0) << "a wildcard listener has no device";

  // (source, destination, the client's port, the port the request arrives on)
  struct Way {
    const char* src;
    const char* dst;
    int client_port, server_port;
  };
  for (const Way& w : {Way{"10.0.0.2", "10.0.0.1", 2, 1}, Way{"10.0.0.1", "10.0.0.2", 1, 2}}) {
    SCOPED_TRACE(std::string(w.src) + " -> " + w.dst);
    rdma_cm_id* client = Connect(w.src, w.dst, 7400, w.client_port);
    rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->listen_id, listener);
    rdma_cm_id* passive = e->id;
    EXPECT_NE(passive, listener);
    EXPECT_EQ(passive->context, &ctx);
    EXPECT_EQ(passive->port_num, w.server_port) << "the port the request arrived on";
    EXPECT_EQ(IpOf(&passive->route.addr.src_addr), w.dst);
    EXPECT_EQ(IpOf(&passive->route.addr.dst_addr), w.src);
    rdma_ack_cm_event(e);
    EXPECT_EQ(rdma_reject(passive, "no", 2), 0) << strerror(errno);
    e = Next(RDMA_CM_EVENT_REJECTED);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id, client);
    EXPECT_EQ(std::string(static_cast<const char*>(e->param.conn.private_data), 2), "no");
    rdma_ack_cm_event(e);
    EXPECT_EQ(rdma_destroy_id(passive), 0);
    EXPECT_EQ(rdma_destroy_id(client), 0);
  }
  EXPECT_EQ(rdma_destroy_id(listener), 0);
}

// A RoCE port's addresses are its non-zero GIDs (ports.cc ReadAddresses; the
// table's read: verbs:gid_table_test); an IPv4 address is looked up mapped.
TEST(PortKeyTest, AnIpv4AddressIsItsMappedGid) {
  uscm_addr a = {};
  a.family = USCM_AF_INET;
  inet_pton(AF_INET, "192.168.77.2", &a.ip[12]);
  EXPECT_EQ(KeyOf(a), V4("192.168.77.2"));
}

}  // namespace
}  // namespace uscm::librdmacm
