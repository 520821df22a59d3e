// rdma_resolve_addr's direct path (direct_addr.cc) on a simulated RoCE port
// (DeviceOptions::roce without the kernel's tables: the destination's GID is
// its IP, resolved within the call): ADDR_RESOLVED reaches the program's
// channel from the call itself, with the kernel's fields (status 0, param
// zero); the device, port and addresses as the pump fills them; uscm's id
// is ADDR_RESOLVED (resolve_route goes ahead, a second resolve_addr is
// EINVAL); synchronous mode; an id with no device yet takes the old path. A neighbour still to be resolved keeps the
// event (CmId::ResolveAddrNow false: api/rdma_cm neighbour_resolve_test);
// IB keeps its path (ids_test, af_ib_test for AF_IB through the calls).
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <memory>
#include <string>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"  // Ipv4
#include "api/librdmacm/roce_port_testing.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

// The drop-in's one port: a RoCE device (192.168.78.1, path MTU 1024) on the
// simulated fabric's host 0.
class DirectAddrTest : public RocePortTest {
 protected:
  static void SetUpTestSuite() { OpenPort(22); }
  void TearDown() override {
    SetDirectAddrsForTesting(true);
    RocePortTest::TearDown();
  }

  // rdma_resolve_addr to 192.168.78.2:7174 of a new id on `ch`, bound to
  // 192.168.78.1 (an ephemeral port) first, as cmtime's (-b): on its device.
  static rdma_cm_id* ResolveNew(rdma_event_channel* ch) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in here = Ipv4("192.168.78.1", 0);
    EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
    EXPECT_EQ(id->port_num, 1);
    sockaddr_in dst = Ipv4("192.168.78.2", 7174);
    EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
        << strerror(errno);
    return id;
  }
};

TEST_F(DirectAddrTest, RoceAddrIsQueuedByTheCallWithTheKernelsFields) {
  const uint64_t direct = DirectAddrs();
  rdma_cm_id* id = ResolveNew(ch_);
  EXPECT_EQ(DirectAddrs(), direct + 1);
  ExpectQueuedByTheCall(ch_, RDMA_CM_EVENT_ADDR_RESOLVED, id);
  if (HasFatalFailure()) return;

  // What librdmacm's ucma_process_addr leaves in the id.
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(id->route.addr.src_sin.sin_family, AF_INET);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &id->route.addr.src_sin.sin_addr, text, sizeof(text));
  EXPECT_STREQ(text, "192.168.78.1");
  EXPECT_NE(rdma_get_src_port(id), 0) << "an ephemeral port";
  EXPECT_EQ(ntohs(rdma_get_dst_port(id)), 7174);
  EXPECT_EQ(GidText(id->route.addr.addr.ibaddr.dgid.raw), "::ffff:192.168.78.2");

  // uscm's id is ADDR_RESOLVED: a second resolve_addr is EINVAL (the
  // kernel's cma_comp_exch from IDLE / ADDR_BOUND fails), resolve_route
  // goes ahead.
  sockaddr_in dst = Ipv4("192.168.78.2", 7174);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(DirectAddrs(), direct + 1);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(Take(ch_, RDMA_CM_EVENT_ROUTE_RESOLVED)), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// An IPv6 link-local address with its interface (sin6_scope_id), as
// getaddrinfo("fe80::2%eth0") gives it.
sockaddr_in6 LinkLocal(const char* ip, uint16_t port, uint32_t scope_id) {
  sockaddr_in6 a = {};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  a.sin6_scope_id = scope_id;
  return a;
}

// As the kernel's rdma_cm: a link-local bind must name its interface
// (cma_check_linklocal: EINVAL), and the interface stays with both addresses
// (the source takes the destination's when not bound: cma_bind_addr).
TEST_F(DirectAddrTest, ALinkLocalAddressKeepsItsInterface) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in6 no_scope = LinkLocal("fe80::1", 0, 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&no_scope)), -1);
  EXPECT_EQ(errno, EINVAL);
  sockaddr_in6 here = LinkLocal("fe80::1", 0, 3);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(reinterpret_cast<sockaddr_in6*>(rdma_get_local_addr(id))->sin6_scope_id, 3u);
  sockaddr_in6 dst = LinkLocal("fe80::2", 7174, 3);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(Take(ch_, RDMA_CM_EVENT_ADDR_RESOLVED)), 0);
  const auto* local = reinterpret_cast<sockaddr_in6*>(rdma_get_local_addr(id));
  const auto* peer = reinterpret_cast<sockaddr_in6*>(rdma_get_peer_addr(id));
  EXPECT_EQ(GidText(local->sin6_addr.s6_addr), "fe80::1");
  EXPECT_EQ(local->sin6_scope_id, 3u);
  EXPECT_EQ(GidText(peer->sin6_addr.s6_addr), "fe80::2");
  EXPECT_EQ(peer->sin6_scope_id, 3u);
  // sin6_flowinfo is kept too (the flow label of an IPv6 source): both ways
  // through the conversion, in network order.
  sockaddr_in6 with_flow = LinkLocal("fe80::1", 0, 3);
  with_flow.sin6_flowinfo = htonl(0x54321);
  uscm_addr converted;
  ASSERT_EQ(ToUscmAddr(reinterpret_cast<sockaddr*>(&with_flow), &converted), 0);
  EXPECT_EQ(converted.flowinfo, 0x54321u);
  sockaddr_storage back;
  ToSockaddr(converted, &back);
  EXPECT_EQ(ntohl(reinterpret_cast<sockaddr_in6*>(&back)->sin6_flowinfo), 0x54321u);
  EXPECT_EQ(GidText(id->route.addr.addr.ibaddr.dgid.raw), "fe80::2");
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The same id as the path through the C API's pump leaves it.
// The kernel's resolve_prepare_src: a source (bound or given) of another
// family than the destination's is EINVAL, before either path.
TEST_F(DirectAddrTest, ASourceOfAnotherFamilyThanTheDestinationIsEinval) {
  sockaddr_in6 dst6 = {};
  dst6.sin6_family = AF_INET6;
  dst6.sin6_port = htons(7174);
  inet_pton(AF_INET6, "::ffff:192.168.78.2", &dst6.sin6_addr);
  sockaddr_in here = Ipv4("192.168.78.1", 0);
  const uint64_t direct = DirectAddrs();

  rdma_cm_id* bound = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &bound, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  ASSERT_EQ(rdma_bind_addr(bound, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(bound, nullptr, reinterpret_cast<sockaddr*>(&dst6), 2000), -1);
  EXPECT_EQ(errno, EINVAL) << "an IPv4 id, an IPv6 destination";

  rdma_cm_id* unbound = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &unbound, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(unbound, reinterpret_cast<sockaddr*>(&here),
                              reinterpret_cast<sockaddr*>(&dst6), 2000),
            -1);
  EXPECT_EQ(errno, EINVAL) << "an IPv4 source, an IPv6 destination";
  EXPECT_EQ(DirectAddrs(), direct);
  EXPECT_EQ(QueuedEvents(ch_), 0);

  // The bound id is as before: an IPv4 destination resolves.
  sockaddr_in dst = Ipv4("192.168.78.2", 7174);
  ASSERT_EQ(rdma_resolve_addr(bound, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(Take(ch_, RDMA_CM_EVENT_ADDR_RESOLVED)), 0);
  EXPECT_EQ(rdma_destroy_id(bound), 0);
  EXPECT_EQ(rdma_destroy_id(unbound), 0);
}

TEST_F(DirectAddrTest, FillsTheIdAsThePumpDoes) {
  rdma_cm_id* ids[2];
  for (int direct = 0; direct < 2; ++direct) {
    SetDirectAddrsForTesting(direct == 1);
    const uint64_t before = DirectAddrs();
    ids[direct] = ResolveNew(ch_);
    EXPECT_EQ(DirectAddrs(), before + direct);
    EXPECT_EQ(rdma_ack_cm_event(Take(ch_, RDMA_CM_EVENT_ADDR_RESOLVED)), 0);
  }
  EXPECT_EQ(ids[0]->verbs, ids[1]->verbs);
  EXPECT_EQ(ids[0]->pd, ids[1]->pd);
  EXPECT_EQ(ids[0]->port_num, ids[1]->port_num);
  EXPECT_EQ(memcmp(&ids[0]->route.addr.addr, &ids[1]->route.addr.addr, sizeof(rdma_ib_addr)), 0);
  EXPECT_EQ(memcmp(&ids[0]->route.addr.dst_storage, &ids[1]->route.addr.dst_storage,
                   sizeof(sockaddr_storage)),
            0);
  // The sources differ in their ephemeral port only.
  EXPECT_EQ(ids[0]->route.addr.src_sin.sin_addr.s_addr, ids[1]->route.addr.src_sin.sin_addr.s_addr);
  EXPECT_NE(rdma_get_src_port(ids[0]), rdma_get_src_port(ids[1]));
  for (rdma_cm_id* id : ids) EXPECT_EQ(rdma_destroy_id(id), 0);
}

// A NULL channel: the call returns with its event in id->event.
TEST_F(DirectAddrTest, SynchronousIdReturnsWithTheEvent) {
  const uint64_t direct = DirectAddrs();
  rdma_cm_id* id = ResolveNew(nullptr);
  EXPECT_EQ(DirectAddrs(), direct + 1);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(id->event->id, id);
  EXPECT_EQ(id->event->status, 0);
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// An id with no device yet (created, not bound) is placed on its port by
// the old path, and its ADDR_RESOLVED comes through the pump.
TEST_F(DirectAddrTest, AnIdWithNoDeviceTakesTheOldPath) {
  const uint64_t direct = DirectAddrs();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(id->port_num, 0);
  sockaddr_in dst = Ipv4("192.168.78.2", 7174);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  EXPECT_EQ(DirectAddrs(), direct);
  rdma_cm_event* e = Take(ch_, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

}  // namespace
}  // namespace uscm::librdmacm
