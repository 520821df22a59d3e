// The built librdmacm.so.1 itself, loaded with dlopen as a program's loader
// would: its version nodes, the rsocket family failing with ENOSYS, the id
// calls failing cleanly (ENODEV with no device), and USCM_DEBUG.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace {

bool NoDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return n == 0;
}

class SharedLibraryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* srcdir = getenv("TEST_SRCDIR");
    std::string path = std::string(srcdir ? srcdir : ".") + "/uscm/api/librdmacm/librdmacm.so.1";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  static void TearDownTestSuite() {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }

  // The function `name` of version node `version`, typed as in the header.
  template <typename F>
  static F* Get(const char* name, const char* version = "RDMACM_1.0") {
    void* sym = dlvsym(handle_, name, version);
    EXPECT_NE(sym, nullptr) << name << "@" << version << ": " << dlerror();
    return reinterpret_cast<F*>(sym);
  }

  static void* handle_;
};

void* SharedLibraryTest::handle_ = nullptr;

#define EXPECT_ENOSYS(call)            \
  do {                                 \
    errno = 0;                         \
    EXPECT_EQ((call), -1) << #call;    \
    EXPECT_EQ(errno, ENOSYS) << #call; \
  } while (0)

TEST_F(SharedLibraryTest, VersionNodesOfLaterFunctions) {
  EXPECT_NE(Get<decltype(rdma_join_multicast_ex)>("rdma_join_multicast_ex", "RDMACM_1.1"), nullptr);
  EXPECT_NE(Get<decltype(rdma_establish)>("rdma_establish", "RDMACM_1.2"), nullptr);
  EXPECT_NE(Get<decltype(rdma_init_qp_attr)>("rdma_init_qp_attr", "RDMACM_1.2"), nullptr);
  EXPECT_NE(Get<decltype(rdma_set_local_ece)>("rdma_set_local_ece", "RDMACM_1.3"), nullptr);
  EXPECT_NE(Get<decltype(rdma_get_remote_ece)>("rdma_get_remote_ece", "RDMACM_1.3"), nullptr);
  EXPECT_NE(Get<decltype(rdma_reject_ece)>("rdma_reject_ece", "RDMACM_1.3"), nullptr);
  // Internal symbols stay local.
  EXPECT_EQ(dlsym(handle_, "_ZN4uscm9librdmacm4FailEiPKcS2_"), nullptr);
}

TEST_F(SharedLibraryTest, RsocketFamilyFailsWithEnosys) {
  char buf[8] = {};
  sockaddr_storage addr = {};
  socklen_t len = sizeof(addr);
  iovec iov = {buf, sizeof(buf)};
  msghdr msg = {};
  pollfd pfd = {0, POLLIN, 0};
  fd_set set;
  FD_ZERO(&set);
  timeval tv = {0, 0};
  int opt = 0;
  socklen_t optlen = sizeof(opt);
  auto* sa = reinterpret_cast<sockaddr*>(&addr);

  EXPECT_ENOSYS(Get<decltype(rsocket)>("rsocket")(AF_INET, SOCK_STREAM, 0));
  EXPECT_ENOSYS(Get<decltype(rbind)>("rbind")(3, sa, len));
  EXPECT_ENOSYS(Get<decltype(rlisten)>("rlisten")(3, 1));
  EXPECT_ENOSYS(Get<decltype(raccept)>("raccept")(3, sa, &len));
  EXPECT_ENOSYS(Get<decltype(rconnect)>("rconnect")(3, sa, len));
  EXPECT_ENOSYS(Get<decltype(rshutdown)>("rshutdown")(3, SHUT_RDWR));
  EXPECT_ENOSYS(Get<decltype(rclose)>("rclose")(3));
  EXPECT_ENOSYS(Get<decltype(rrecv)>("rrecv")(3, buf, sizeof(buf), 0));
  EXPECT_ENOSYS(Get<decltype(rrecvfrom)>("rrecvfrom")(3, buf, sizeof(buf), 0, sa, &len));
  EXPECT_ENOSYS(Get<decltype(rrecvmsg)>("rrecvmsg")(3, &msg, 0));
  EXPECT_ENOSYS(Get<decltype(rsend)>("rsend")(3, buf, sizeof(buf), 0));
  EXPECT_ENOSYS(Get<decltype(rsendto)>("rsendto")(3, buf, sizeof(buf), 0, sa, len));
  EXPECT_ENOSYS(Get<decltype(rsendmsg)>("rsendmsg")(3, &msg, 0));
  EXPECT_ENOSYS(Get<decltype(rread)>("rread")(3, buf, sizeof(buf)));
  EXPECT_ENOSYS(Get<decltype(rreadv)>("rreadv")(3, &iov, 1));
  EXPECT_ENOSYS(Get<decltype(rwrite)>("rwrite")(3, buf, sizeof(buf)));
  EXPECT_ENOSYS(Get<decltype(rwritev)>("rwritev")(3, &iov, 1));
  EXPECT_ENOSYS(Get<decltype(rpoll)>("rpoll")(&pfd, 1, 0));
  EXPECT_ENOSYS(Get<decltype(rselect)>("rselect")(1, &set, nullptr, nullptr, &tv));
  EXPECT_ENOSYS(Get<decltype(rgetpeername)>("rgetpeername")(3, sa, &len));
  EXPECT_ENOSYS(Get<decltype(rgetsockname)>("rgetsockname")(3, sa, &len));
  EXPECT_ENOSYS(
      Get<decltype(rsetsockopt)>("rsetsockopt")(3, SOL_SOCKET, SO_REUSEADDR, &opt, sizeof(opt)));
  EXPECT_ENOSYS(
      Get<decltype(rgetsockopt)>("rgetsockopt")(3, SOL_SOCKET, SO_REUSEADDR, &opt, &optlen));
  EXPECT_ENOSYS(Get<decltype(rfcntl)>("rfcntl")(3, F_GETFL));
  EXPECT_ENOSYS(Get<decltype(riomap)>("riomap")(3, buf, sizeof(buf), PROT_WRITE, 0, -1));
  EXPECT_ENOSYS(Get<decltype(riounmap)>("riounmap")(3, buf, sizeof(buf)));
  errno = 0;
  EXPECT_EQ(Get<decltype(riowrite)>("riowrite")(3, buf, sizeof(buf), 0, 0),
            static_cast<size_t>(-1));
  EXPECT_EQ(errno, ENOSYS);
}

TEST_F(SharedLibraryTest, IdCallsFailCleanlyWithoutADevice) {
  if (!NoDevice()) GTEST_SKIP() << "this machine has an RDMA device";
  errno = 0;
  EXPECT_EQ(Get<decltype(rdma_create_event_channel)>("rdma_create_event_channel")(), nullptr);
  EXPECT_EQ(errno, ENODEV);
  rdma_cm_id* id = nullptr;
  errno = 0;
  EXPECT_EQ(Get<decltype(rdma_create_id)>("rdma_create_id")(nullptr, &id, nullptr, RDMA_PS_TCP),
            -1);
  EXPECT_EQ(errno, ENODEV);
  rdma_cm_id fake = {};
  sockaddr_in dst = {};
  dst.sin_family = AF_INET;
  errno = 0;
  EXPECT_EQ(Get<decltype(rdma_resolve_addr)>("rdma_resolve_addr")(
                &fake, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000),
            -1);
  EXPECT_EQ(errno, ENODEV);
  int n = -1;
  errno = 0;
  EXPECT_EQ(Get<decltype(rdma_get_devices)>("rdma_get_devices")(&n), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(n, 0);
}

// Runs `call` with stderr captured; returns what it printed.
template <typename F>
std::string Stderr(F call) {
  fflush(stderr);
  char path[] = "/tmp/uscm_stderr_XXXXXX";
  int tmp = mkstemp(path);
  EXPECT_GE(tmp, 0);
  unlink(path);
  int saved = dup(2);
  dup2(tmp, 2);
  call();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string out(4096, '\0');
  ssize_t n = pread(tmp, out.data(), out.size(), 0);
  close(tmp);
  out.resize(n > 0 ? n : 0);
  return out;
}

TEST_F(SharedLibraryTest, SilentByDefaultUscmDebugSaysWhy) {
  auto* rs = Get<decltype(rsocket)>("rsocket");
  unsetenv("USCM_DEBUG");
  EXPECT_EQ(Stderr([&] { rs(AF_INET, SOCK_STREAM, 0); }), "");
  setenv("USCM_DEBUG", "0", 1);
  EXPECT_EQ(Stderr([&] { rs(AF_INET, SOCK_STREAM, 0); }), "");
  setenv("USCM_DEBUG", "1", 1);
  EXPECT_EQ(Stderr([&] { rs(AF_INET, SOCK_STREAM, 0); }),
            "uscm librdmacm: rsocket: rsockets are not implemented on uscm [ENOSYS]\n");
  if (NoDevice()) {
    auto* create = Get<decltype(rdma_create_id)>("rdma_create_id");
    rdma_cm_id* id = nullptr;
    std::string out = Stderr([&] { create(nullptr, &id, nullptr, RDMA_PS_TCP); });
    EXPECT_NE(out.find("uscm librdmacm: rdma_create_id: "), std::string::npos) << out;
    EXPECT_NE(out.find("[ENODEV]"), std::string::npos) << out;
  }
  unsetenv("USCM_DEBUG");
}

}  // namespace
