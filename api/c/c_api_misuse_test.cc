// Wrong use of the C API: a null id, channel, event or argument to every call
// that takes one. Each fails with -1, errno (EINVAL) and a uscm_last_error()
// that names the call; nothing crashes, and the id used afterwards still works.
#include <errno.h>
#include <string.h>

#include <string>

#include "api/c/c_api_testing.h"
#include "api/c/uscm_cma.h"
#include "gtest/gtest.h"

namespace uscm::testing {
namespace {

using CApiMisuseTest = CApiOneChannelTest;

// -1 and EINVAL, with a message.
#define EXPECT_EINVAL(call)                                                         \
  do {                                                                              \
    errno = 0;                                                                      \
    EXPECT_EQ((call), -1) << #call;                                                 \
    EXPECT_EQ(errno, EINVAL) << #call << ": " << strerror(errno);                   \
    EXPECT_STRNE(uscm_last_error(), "") << #call;                                   \
  } while (0)

TEST_F(CApiMisuseTest, NullIdToEveryCall) {
  uscm_addr a{};
  ASSERT_EQ(uscm_parse_addr("10.0.0.2:7471", &a), 0);
  uscm_conn_param p{};
  uscm_ece ece{};
  uscm_qp_attr qa{};
  int mask = 0;
  uscm_path path{};
  EXPECT_EINVAL(uscm_destroy_id(nullptr));
  EXPECT_EINVAL(uscm_migrate_id(nullptr, ch_));
  EXPECT_EINVAL(uscm_bind_addr(nullptr, &a));
  EXPECT_EINVAL(uscm_resolve_addr(nullptr, nullptr, &a, 100));
  EXPECT_EINVAL(uscm_resolve_addr_now(nullptr, nullptr, &a, 100, nullptr, nullptr));
  EXPECT_EINVAL(uscm_resolve_route(nullptr, 100));
  EXPECT_EINVAL(uscm_resolve_route_now(nullptr, &path));
  EXPECT_EINVAL(uscm_connect(nullptr, &p));
  EXPECT_EINVAL(uscm_listen(nullptr, 1));
  EXPECT_EINVAL(uscm_accept(nullptr, &p));
  EXPECT_EINVAL(uscm_reject(nullptr, nullptr, 0));
  EXPECT_EINVAL(uscm_reject_ece(nullptr, nullptr, 0));
  EXPECT_EINVAL(uscm_set_local_ece(nullptr, &ece));
  EXPECT_EINVAL(uscm_get_remote_ece(nullptr, &ece));
  EXPECT_EINVAL(uscm_establish(nullptr));
  EXPECT_EINVAL(uscm_notify(nullptr));
  EXPECT_EINVAL(uscm_disconnect(nullptr));
  int one = 1;
  EXPECT_EINVAL(uscm_set_option(nullptr, USCM_OPTION_ID, USCM_OPTION_ID_REUSEADDR, &one,
                                sizeof(one)));
  EXPECT_EINVAL(uscm_join_multicast(nullptr, &a, nullptr));
  EXPECT_EINVAL(uscm_leave_multicast(nullptr, &a));
  EXPECT_EINVAL(uscm_init_qp_attr(nullptr, &qa, &mask));
  EXPECT_EINVAL(uscm_set_qp(nullptr, nullptr));
  EXPECT_EINVAL(uscm_getname(nullptr, &a));
  EXPECT_EINVAL(uscm_getpeer(nullptr, &a));
  EXPECT_EINVAL(uscm_get_route(nullptr, &path));
  uscm_destroy_qp(nullptr);  // void: does nothing
  uscm_cm_event* e = nullptr;
  EXPECT_EINVAL(uscm_get_cm_event(nullptr, &e));
  EXPECT_EINVAL(uscm_try_get_cm_event(nullptr, &e));
  EXPECT_EINVAL(uscm_ack_cm_event(nullptr));
  uscm_destroy_event_channel(nullptr);  // void: does nothing
  EXPECT_EINVAL(uscm_parse_addr(nullptr, &a));
  EXPECT_EINVAL(uscm_parse_addr("10.0.0.2", nullptr));
}

TEST_F(CApiMisuseTest, NullArgumentsOnALiveIdThenItStillWorks) {
  uscm_cm_id* id = nullptr;
  EXPECT_EINVAL(uscm_create_id(ch_, nullptr, nullptr, USCM_PS_TCP));
  ASSERT_EQ(uscm_create_id(ch_, &id, nullptr, USCM_PS_TCP), 0) << uscm_last_error();
  EXPECT_EINVAL(uscm_bind_addr(id, nullptr));
  EXPECT_EINVAL(uscm_resolve_addr(id, nullptr, nullptr, 100));
  EXPECT_EINVAL(uscm_resolve_addr_now(id, nullptr, nullptr, 100, nullptr, nullptr));
  EXPECT_EINVAL(uscm_set_local_ece(id, nullptr));
  EXPECT_EINVAL(uscm_get_remote_ece(id, nullptr));
  EXPECT_EINVAL(uscm_set_option(id, USCM_OPTION_ID, USCM_OPTION_ID_TOS, nullptr, 1));
  EXPECT_EINVAL(uscm_join_multicast(id, nullptr, nullptr));
  EXPECT_EINVAL(uscm_join_multicast_ex(id, nullptr, nullptr));
  EXPECT_EINVAL(uscm_leave_multicast(id, nullptr));
  EXPECT_EINVAL(uscm_init_qp_attr(id, nullptr, nullptr));
  EXPECT_EINVAL(uscm_getname(id, nullptr));
  EXPECT_EINVAL(uscm_getpeer(id, nullptr));
  EXPECT_EINVAL(uscm_get_route(id, nullptr));
  EXPECT_EINVAL(uscm_resolve_route_now(id, nullptr));
  EXPECT_EINVAL(uscm_get_cm_event(ch_, nullptr));
  EXPECT_EINVAL(uscm_try_get_cm_event(ch_, nullptr));

  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  AckOn(ch_, USCM_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
}

}  // namespace
}  // namespace uscm::testing
