// Wrong use of the API: a null argument, an argument of the wrong kind, a
// call in the wrong state. librdmacm dereferences many of these and crashes;
// the drop-in answers -1 with errno (EINVAL unless noted) and the id keeps
// working. (rdma_migrate_id to a null channel is no misuse: it moves the id to
// synchronous mode, as librdmacm.)
#include <rdma/rdma_verbs.h>

#include "api/librdmacm/ids_testing.h"

namespace uscm::librdmacm {
namespace {

class MisuseTest : public IdsTest {};

// -1 and errno `want`, the way every call here must fail.
#define EXPECT_FAILS_WITH(call, want)                  \
  do {                                                 \
    errno = 0;                                         \
    EXPECT_EQ((call), -1) << #call;                    \
    EXPECT_EQ(errno, (want)) << #call << ": " << strerror(errno); \
  } while (0)

TEST_F(MisuseTest, NullIdIsEinvalEverywhere) {
  EXPECT_FAILS_WITH(rdma_destroy_id(nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_bind_addr(nullptr, nullptr), EINVAL);
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  EXPECT_FAILS_WITH(rdma_resolve_addr(nullptr, nullptr, reinterpret_cast<sockaddr*>(&dst), 100),
                    EINVAL);
  EXPECT_FAILS_WITH(rdma_resolve_route(nullptr, 100), EINVAL);
  EXPECT_FAILS_WITH(rdma_connect(nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_listen(nullptr, 1), EINVAL);
  EXPECT_FAILS_WITH(rdma_accept(nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_reject(nullptr, nullptr, 0), EINVAL);
  EXPECT_FAILS_WITH(rdma_reject_ece(nullptr, nullptr, 0), EINVAL);
  EXPECT_FAILS_WITH(rdma_disconnect(nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_notify(nullptr, IBV_EVENT_COMM_EST), EINVAL);
  EXPECT_FAILS_WITH(rdma_establish(nullptr), EINVAL);
  int one = 1;
  EXPECT_FAILS_WITH(
      rdma_set_option(nullptr, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)),
      EINVAL);
  EXPECT_FAILS_WITH(rdma_migrate_id(nullptr, ch_), EINVAL);
  EXPECT_FAILS_WITH(rdma_join_multicast(nullptr, reinterpret_cast<sockaddr*>(&dst), nullptr),
                    EINVAL);
  EXPECT_FAILS_WITH(rdma_leave_multicast(nullptr, reinterpret_cast<sockaddr*>(&dst)), EINVAL);
  ibv_ece ece = {};
  EXPECT_FAILS_WITH(rdma_set_local_ece(nullptr, &ece), EINVAL);
  EXPECT_FAILS_WITH(rdma_get_remote_ece(nullptr, &ece), EINVAL);
  ibv_qp_attr attr = {};
  int mask = 0;
  EXPECT_FAILS_WITH(rdma_init_qp_attr(nullptr, &attr, &mask), EINVAL);
  ibv_qp_init_attr init = {};
  EXPECT_FAILS_WITH(rdma_create_qp(nullptr, nullptr, &init), EINVAL);
  ibv_srq_init_attr srq = {};
  EXPECT_FAILS_WITH(rdma_create_srq(nullptr, nullptr, &srq), EINVAL);
  rdma_cm_id* child = nullptr;
  EXPECT_FAILS_WITH(rdma_get_request(nullptr, &child), EINVAL);
  EXPECT_EQ(rdma_get_src_port(nullptr), 0);
  EXPECT_EQ(rdma_get_dst_port(nullptr), 0);
  rdma_destroy_qp(nullptr);   // void: must not crash
  rdma_destroy_srq(nullptr);  // void: must not crash
  rdma_destroy_ep(nullptr);   // void: must not crash
  rdma_freeaddrinfo(nullptr);
  rdma_free_devices(nullptr);
}

TEST_F(MisuseTest, NullArgumentsOnALiveIdAreEinval) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  EXPECT_FAILS_WITH(rdma_resolve_addr(id, nullptr, nullptr, 100), EINVAL);
  EXPECT_FAILS_WITH(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, nullptr, 1), EINVAL);
  uint8_t tos = 0;
  EXPECT_FAILS_WITH(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 0), EINVAL);
  EXPECT_FAILS_WITH(rdma_set_option(id, 99, 99, &tos, sizeof(tos)), ENOSYS);
  EXPECT_FAILS_WITH(rdma_set_local_ece(id, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_get_remote_ece(id, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_join_multicast(id, nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_join_multicast_ex(id, nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_leave_multicast(id, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_init_qp_attr(id, nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_create_qp(id, nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_create_qp_ex(id, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_create_srq(id, nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_create_srq_ex(id, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_get_cm_event(ch_, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_get_cm_event(nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_ack_cm_event(nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_getaddrinfo(nullptr, nullptr, nullptr, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_create_ep(nullptr, nullptr, nullptr, nullptr), EINVAL);
  sockaddr_in bad = {};
  bad.sin_family = 12345;
  // librdmacm's ucma_addrlen is 0 for a family it does not know: EINVAL.
  EXPECT_FAILS_WITH(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&bad)), EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

TEST_F(MisuseTest, CallsInTheWrongStateFailAndTheIdStillWorks) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  EXPECT_FAILS_WITH(rdma_resolve_route(id, 100), EINVAL);
  EXPECT_FAILS_WITH(rdma_accept(id, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_reject(id, nullptr, 0), EINVAL);
  EXPECT_FAILS_WITH(rdma_disconnect(id), EINVAL);
  EXPECT_FAILS_WITH(rdma_establish(id), EINVAL);
  EXPECT_FAILS_WITH(rdma_notify(id, IBV_EVENT_COMM_EST), EINVAL);
  rdma_cm_id* child = nullptr;
  EXPECT_FAILS_WITH(rdma_get_request(id, &child), EINVAL);
  // After all that the id resolves an address as a new one does.
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

TEST_F(MisuseTest, ActiveSideCallsOnAListenerFail) {
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &listener, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in src = Ipv4("10.0.0.1", 7490);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&src)), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);
  // 6.1's rdma_listen on an id that is not ADDR_BOUND binds it first, which
  // fails on a listener (not IDLE).
  EXPECT_FAILS_WITH(rdma_listen(listener, 8), EINVAL);
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  EXPECT_FAILS_WITH(rdma_resolve_addr(listener, nullptr, reinterpret_cast<sockaddr*>(&dst), 100),
                    EINVAL);
  EXPECT_FAILS_WITH(rdma_resolve_route(listener, 100), EINVAL);
  EXPECT_FAILS_WITH(rdma_connect(listener, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_accept(listener, nullptr), EINVAL);
  EXPECT_FAILS_WITH(rdma_disconnect(listener), EINVAL);
  EXPECT_FAILS_WITH(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&src)), EINVAL);
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
}

}  // namespace
}  // namespace uscm::librdmacm
