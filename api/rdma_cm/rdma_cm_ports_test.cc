// Port binding as the kernel's rdma_cm (rdma_cm_ports.cc after the kernel's
// cma_use_port / cma_check_port / rdma_listen): which binds and listens on one
// port conflict, with which errno.
#include <cerrno>
#include <memory>

#include "api/rdma_cm/one_device_fixture.h"
#include "api/rdma_cm/rdma_cm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/status_errno.h"

namespace uscm {
namespace {

using ::testing::HasSubstr;

class PortBindingTest : public testing::OneDeviceTest {
 protected:
  void SetUp() override {
    DeviceOptions o;
    o.roce = true;
    o.local_ips = {*Address::Parse("192.168.78.1"), *Address::Parse("192.168.78.3"),
                   *Address::Parse("fd00::1")};
    o.may_bind_privileged_port = [this] { return privileged_; };
    ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/5, o));
  }
  // A new TCP id, with AFONLY / REUSEADDR when asked.
  CmId* Id(absl::optional<bool> af_only = absl::nullopt, bool reuse = false) {
    CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
    IdOptions o = id->options();
    o.af_only = af_only;
    o.reuse_addr = reuse;
    EXPECT_TRUE(id->SetOption(o).ok());
    return id;
  }
  // The errno the C layers report for `s` (0 for OK; -1 when none is carried
  // and the code maps to none of the below).
  static int Errno(const absl::Status& s) {
    if (s.ok()) return 0;
    if (int e = mad::ErrnoOf(s); e != 0) return e;
    if (absl::IsAlreadyExists(s)) return EADDRINUSE;
    if (absl::IsPermissionDenied(s)) return EACCES;
    return -1;
  }
  static Address At(const char* text) { return *Address::Parse(text); }
  bool privileged_ = true;
};

TEST_F(PortBindingTest, TwoSpecificAddressesShareAPortTheSameOneDoesNot) {
  CmId* a = Id();
  CmId* b = Id();
  CmId* c = Id();
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:7000")).ok());
  EXPECT_EQ(Errno(b->BindAddr(At("192.168.78.3:7000"))), 0);
  EXPECT_EQ(Errno(c->BindAddr(At("192.168.78.1:7000"))), EADDRINUSE);
  // Both listen: a listener holds its own address only.
  ASSERT_TRUE(a->Listen(1).ok());
  EXPECT_TRUE(b->Listen(1).ok());
  // The failed id is unbound and may bind elsewhere.
  EXPECT_EQ(Errno(c->BindAddr(At("192.168.78.1:7001"))), 0);
}

TEST_F(PortBindingTest, AWildcardConflictsWithEveryAddressWithEaddrnotavail) {
  CmId* any = Id();
  CmId* one = Id();
  ASSERT_TRUE(any->BindAddr(At("0.0.0.0:7000")).ok());
  absl::Status s = one->BindAddr(At("192.168.78.1:7000"));
  EXPECT_EQ(Errno(s), EADDRNOTAVAIL) << s;
  EXPECT_THAT(s.message(), HasSubstr("wildcard"));
  CmId* second_any = Id();
  EXPECT_EQ(Errno(second_any->BindAddr(At("0.0.0.0:7000"))), EADDRNOTAVAIL);
}

TEST_F(PortBindingTest, Ipv6WildcardTakesIpv4UnlessAfOnly) {
  // Without AFONLY (bindv6only 0) [::] also covers IPv4: 0.0.0.0 conflicts.
  CmId* v6 = Id();
  CmId* v4 = Id();
  ASSERT_TRUE(v6->BindAddr(At("[::]:7000")).ok());
  EXPECT_EQ(Errno(v4->BindAddr(At("0.0.0.0:7000"))), EADDRNOTAVAIL);
  EXPECT_EQ(Errno(v4->BindAddr(At("192.168.78.1:7000"))), EADDRNOTAVAIL);
  // With AFONLY on the IPv6 id the families are apart.
  CmId* v6_only = Id(/*af_only=*/true);
  CmId* v4b = Id();
  ASSERT_TRUE(v6_only->BindAddr(At("[::]:7100")).ok());
  EXPECT_EQ(Errno(v4b->BindAddr(At("0.0.0.0:7100"))), 0);
  // AFONLY 0 said explicitly is the same as unset (bindv6only 0).
  CmId* v6_not_only = Id(/*af_only=*/false);
  CmId* v4c = Id();
  ASSERT_TRUE(v4c->BindAddr(At("0.0.0.0:7200")).ok());
  EXPECT_EQ(Errno(v6_not_only->BindAddr(At("[::]:7200"))), EADDRNOTAVAIL);
  // Two specific addresses of the two families never conflict.
  CmId* s6 = Id();
  CmId* s4 = Id();
  ASSERT_TRUE(s6->BindAddr(At("[fd00::1]:7300")).ok());
  EXPECT_EQ(Errno(s4->BindAddr(At("192.168.78.1:7300"))), 0);
}

TEST_F(PortBindingTest, ReuseAddrSharesBindsButAListenerHoldsItsAddressAlone) {
  CmId* a = Id(absl::nullopt, /*reuse=*/true);
  CmId* b = Id(absl::nullopt, /*reuse=*/true);
  CmId* plain = Id();
  ASSERT_TRUE(a->BindAddr(At("0.0.0.0:7000")).ok());
  ASSERT_TRUE(b->BindAddr(At("0.0.0.0:7000")).ok());
  EXPECT_EQ(Errno(plain->BindAddr(At("0.0.0.0:7000"))), EADDRNOTAVAIL);
  // The first listen checks without REUSEADDR: b holds the same wildcard.
  EXPECT_EQ(Errno(a->Listen(1)), EADDRNOTAVAIL);
  ASSERT_TRUE(ch_->DestroyId(b).ok());
  ASSERT_TRUE(a->Listen(1).ok());
  EXPECT_FALSE(a->options().reuse_addr) << "a listener is no longer reusable";
  CmId* late = Id(absl::nullopt, /*reuse=*/true);
  EXPECT_EQ(Errno(late->BindAddr(At("0.0.0.0:7000"))), EADDRNOTAVAIL);
}

// The kernel's rdma_set_reuseaddr (6.1): `(reuse && state != LISTEN) ||
// state == IDLE`, else EINVAL; the flag is read by later binds of other ids.
TEST_F(PortBindingTest, ReuseAddrMayBeTurnedOnAfterTheBindButNotInListen) {
  CmId* a = Id();
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:7000")).ok());
  CmId* b = Id(absl::nullopt, /*reuse=*/true);
  EXPECT_EQ(Errno(b->BindAddr(At("192.168.78.1:7000"))), EADDRINUSE);
  IdOptions on = a->options();
  on.reuse_addr = true;
  ASSERT_TRUE(a->SetOption(on).ok()) << "bound: REUSEADDR on is allowed";
  EXPECT_EQ(Errno(b->BindAddr(At("192.168.78.1:7000"))), 0);
  CmId* plain = Id();
  EXPECT_EQ(Errno(plain->BindAddr(At("192.168.78.1:7000"))), EADDRINUSE);
  // Off after the bind: refused, also when it is off already.
  EXPECT_EQ(a->SetOption(IdOptions{}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(plain->SetReuseAddr(false).ok()) << "IDLE and unbound (its bind failed)";
  ASSERT_TRUE(ch_->DestroyId(b).ok());
  ASSERT_TRUE(a->Listen(1).ok());
  EXPECT_EQ(a->SetReuseAddr(true).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a->SetReuseAddr(false).code(), absl::StatusCode::kFailedPrecondition);
  CmId* c = Id();
  ASSERT_TRUE(c->BindAddr(At("192.168.78.3:7000")).ok());
  EXPECT_EQ(c->SetReuseAddr(false).code(), absl::StatusCode::kFailedPrecondition)
      << "off after the bind is EINVAL even when it is off already";
  EXPECT_TRUE(c->SetReuseAddr(true).ok());
}

TEST_F(PortBindingTest, APortBelow1024NeedsCapNetBindServiceAtBind) {
  privileged_ = false;
  CmId* id = Id();
  absl::Status s = id->BindAddr(At("192.168.78.1:80"));
  EXPECT_EQ(Errno(s), EACCES) << s;
  EXPECT_THAT(s.message(), HasSubstr("CAP_NET_BIND_SERVICE"));
  EXPECT_EQ(Errno(id->BindAddr(At("192.168.78.1:1024"))), 0);
  CmId* eph = Id();
  EXPECT_EQ(Errno(eph->BindAddr(At("192.168.78.1:0"))), 0) << "an ephemeral port needs nothing";
  privileged_ = true;
  CmId* root = Id();
  EXPECT_EQ(Errno(root->BindAddr(At("192.168.78.1:80"))), 0);
}

TEST_F(PortBindingTest, AnAddressOfNoPortIsEaddrnotavail) {
  CmId* id = Id();
  absl::Status s = id->BindAddr(At("10.9.9.9:7000"));
  EXPECT_EQ(Errno(s), EADDRNOTAVAIL) << s;
  EXPECT_THAT(s.message(), HasSubstr("is not an address of"));
}

// The netdev gained 10.9.9.9 and lost 192.168.78.3 (api/c re-reads them):
// later binds follow, an id already bound keeps its address.
TEST_F(PortBindingTest, BindsFollowTheAddressesSetLater) {
  CmId* kept = Id();
  ASSERT_TRUE(kept->BindAddr(At("192.168.78.3:7000")).ok());
  dev_->SetPortAddresses({At("192.168.78.1"), At("10.9.9.9"), At("fd00::1")}, {});
  CmId* added = Id();
  EXPECT_EQ(Errno(added->BindAddr(At("10.9.9.9:7000"))), 0);
  CmId* removed = Id();
  EXPECT_EQ(Errno(removed->BindAddr(At("192.168.78.3:7001"))), EADDRNOTAVAIL);
  EXPECT_EQ(kept->GetLocalAddr().ToString(), "192.168.78.3:7000");
}

TEST_F(PortBindingTest, ADestroyedOwnerFreesItsAddressOnly) {
  CmId* a = Id();
  CmId* b = Id();
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:7000")).ok());
  ASSERT_TRUE(b->BindAddr(At("192.168.78.3:7000")).ok());
  ASSERT_TRUE(ch_->DestroyId(a).ok());
  CmId* c = Id();
  EXPECT_EQ(Errno(c->BindAddr(At("192.168.78.1:7000"))), 0);
  CmId* d = Id();
  EXPECT_EQ(Errno(d->BindAddr(At("192.168.78.3:7000"))), EADDRINUSE);
}

}  // namespace
}  // namespace uscm
