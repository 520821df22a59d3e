// resolve_addr through DeviceOptions::resolve_neighbour (the kernel's route and
// neighbour tables on a real port, verbs/neighbours.h): what each answer of the
// table becomes, as the kernel's rdma_resolve_addr reports it.
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/one_device_fixture.h"
#include "gtest/gtest.h"
#include "mad/status_errno.h"

namespace uscm {
namespace {

using Answer = absl::StatusOr<absl::optional<mad::Gid>>;

class NeighbourResolveTest : public testing::OneDeviceTest {
 protected:
  void OpenWithTable(bool roce, mad::Duration reuse = mad::Duration::Seconds(1)) {
    DeviceOptions o;
    o.roce = roce;
    o.neighbour_reuse = reuse;
    o.local_ips = {*Address::Parse("192.168.78.1")};
    // Called from the caller's thread and from the device's resolver thread.
    o.resolve_neighbour = [this](const Address& src, const Address& dst, mad::Duration timeout) {
      std::lock_guard<std::mutex> lock(mu_);
      asked_.push_back(src.ToString() + " -> " + dst.ToString() + " in " + timeout.ToString());
      if (pending_answers_ > 0) {
        --pending_answers_;
        return Answer(mad::WithErrno(absl::DeadlineExceededError("still resolving"), ETIMEDOUT));
      }
      return answer_;
    };
    Open(/*seed=*/5, o);
  }
  // The next event, waiting (real time) for the device's resolver thread.
  Event NextWithin(int ms) {
    pollfd p{ch_->fd(), POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, ms), 1) << "no event within " << ms << " ms";
    return Next();
  }
  size_t Asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_.size();
  }

  std::mutex mu_;
  Answer answer_ = absl::optional<mad::Gid>();
  int pending_answers_ = 0;  // "still resolving" answers before answer_
  std::vector<std::string> asked_;
};

TEST_F(NeighbourResolveTest, RoceAsksTheTableWithTheSourceAndTimeoutThenUsesTheIpsGid) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.2:7174"),
                              mad::Duration::Millis(1500))
                  .ok());
  Event e = Next();
  EXPECT_EQ(e.event, EventType::kAddrResolved) << e.detail;
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].rfind("192.168.78.1:", 0), 0u) << asked_[0];
  EXPECT_NE(asked_[0].find(" -> 192.168.78.2:7174 in 0"), std::string::npos)
      << asked_[0] << ": a probe, without waiting";
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "::ffff:192.168.78.2");
}

TEST_F(NeighbourResolveTest, ATableThatFailsIsAddrErrorWithItsErrno) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  answer_ = mad::WithErrno(absl::UnavailableError("netlink: cannot open NETLINK_ROUTE"), EIO);
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.9")).ok());
  Event e = Next();
  EXPECT_EQ(e.event, EventType::kAddrError);
  EXPECT_EQ(e.status, -EIO);
  EXPECT_EQ(e.detail, "netlink: cannot open NETLINK_ROUTE");
}

TEST_F(NeighbourResolveTest, NoRouteFailsTheCallItselfWithItsErrno) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  answer_ = mad::WithErrno(absl::UnavailableError("no route to 10.99.0.1"), ENETUNREACH);
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  absl::Status s = id->ResolveAddr(absl::nullopt, *Address::Parse("10.99.0.1"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(mad::ErrnoOf(s), ENETUNREACH) << s;
  EXPECT_EQ(s.message(), "resolve_addr: no route to 10.99.0.1");
  EXPECT_EQ(id->state(), IdState::kIdle);
}

TEST_F(NeighbourResolveTest, InfinibandTakesTheGidFromTheIpoibEntry) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/false));
  answer_ = absl::optional<mad::Gid>(*mad::Gid::Parse("fe80::2:c903:a1:b2c3"));
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.3")).ok());
  EXPECT_EQ(Next().event, EventType::kAddrResolved);
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "fe80::2:c903:a1:b2c3");
  // An entry without a GID (an Ethernet MAC on an IB port) is no destination.
  answer_ = absl::optional<mad::Gid>();
  CmId* other = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(other->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.4")).ok());
  Event e = Next();
  EXPECT_EQ(e.event, EventType::kAddrError);
  EXPECT_EQ(e.status, -EHOSTUNREACH);
}

TEST_F(NeighbourResolveTest, AnEntryStillResolvingAnswersLaterFromTheResolverThread) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  pending_answers_ = 3;  // before the resolver thread exists: no lock needed
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.2"),
                              mad::Duration::Seconds(10))
                  .ok());
  EXPECT_EQ(id->state(), IdState::kAddrQuery) << "the call returns before the answer";
  Event e = NextWithin(5000);
  EXPECT_EQ(e.event, EventType::kAddrResolved) << e.detail;
  EXPECT_EQ(Asked(), 4u) << "three probes said 'still resolving'";
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "::ffff:192.168.78.2");
}

TEST_F(NeighbourResolveTest, AnEntryThatNeverResolvesIsAddrErrorAfterTheTimeout) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  pending_answers_ = 1 << 30;
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.9"),
                              mad::Duration::Millis(20))
                  .ok());
  Event e = NextWithin(5000);
  EXPECT_EQ(e.event, EventType::kAddrError);
  EXPECT_EQ(e.status, -ETIMEDOUT);
  EXPECT_EQ(e.detail, "still resolving (waited 20ms)");
  // ADDR_BOUND again, as the kernel's addr_handler leaves it: a second try works.
  EXPECT_EQ(id->state(), IdState::kIdle);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_answers_ = 0;
  }
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.9")).ok());
  EXPECT_EQ(Next().event, EventType::kAddrResolved);
}

TEST_F(NeighbourResolveTest, DestroyingAnIdWhileItsEntryResolvesLeavesNoEvent) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  pending_answers_ = 1 << 30;
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.9"),
                              mad::Duration::Millis(30))
                  .ok());
  const size_t asked = Asked();
  ASSERT_TRUE(ch_->DestroyId(id).ok());
  pollfd p{ch_->fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0) << "an event for a destroyed id";
  // At most the round that was under way when the id went probes it once more.
  EXPECT_LE(Asked(), asked + 1) << "the destroyed id's entry is no longer probed";
}

// A multicast group on RoCE (mckey resolves to it) asks no neighbour table:
// its GID is the IP's, as the kernel's NOARP multicast neighbour.
TEST_F(NeighbourResolveTest, RoceMulticastGroupNeedsNoNeighbour) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true));
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kUdp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("239.1.2.3")).ok());
  EXPECT_EQ(Next().event, EventType::kAddrResolved);
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "::ffff:239.1.2.3");
  EXPECT_EQ(Asked(), 0u);
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

// DeviceOptions::neighbour_reuse: a burst of resolves to one destination
// (cmtime's 1,000 ids) asks the table once; each id still gets its event.
TEST_F(NeighbourResolveTest, AUsableAnswerIsReusedForTheSameSourceAndDestination) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true, mad::Duration::Seconds(3600)));
  std::vector<CmId*> ids;
  for (const char* dst : {"192.168.78.2:7174", "192.168.78.2:7175", "192.168.78.3:7174"}) {
    CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(id->ResolveAddr(*Address::Parse("192.168.78.1"), *Address::Parse(dst)).ok());
    Event e = Next();
    EXPECT_EQ(e.event, EventType::kAddrResolved) << e.detail;
    EXPECT_EQ(id->state(), IdState::kAddrResolved);
    ids.push_back(id);
  }
  EXPECT_EQ(Asked(), 2u) << "192.168.78.2 once, 192.168.78.3 once";
  EXPECT_EQ(dev_->neighbour_reuses(), 1u);
  EXPECT_EQ(ids[1]->GetPeerAddr().gid.ToString(), "::ffff:192.168.78.2");
  EXPECT_EQ(ids[1]->GetPeerAddr().port, 7175);
  for (CmId* id : ids) ASSERT_TRUE(ch_->DestroyId(id).ok());
}

// The answer remembered last is asked first (Device::last_reusable_); the
// others stay reusable, and a remembered answer is not reused past its
// window. Passes before and after that copy was added: it guards that the
// copy changes no answer.
TEST_F(NeighbourResolveTest, ReuseAlternatingDestinationsAndPastTheWindow) {
  ASSERT_NO_FATAL_FAILURE(OpenWithTable(/*roce=*/true, mad::Duration::Seconds(1)));
  std::vector<CmId*> ids;
  auto resolve = [&](const char* dst) {
    CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(id->ResolveAddr(*Address::Parse("192.168.78.1"), *Address::Parse(dst)).ok());
    EXPECT_EQ(Next().event, EventType::kAddrResolved);
    ids.push_back(id);
  };
  for (const char* dst : {"192.168.78.2", "192.168.78.3", "192.168.78.2", "192.168.78.3"}) {
    ASSERT_NO_FATAL_FAILURE(resolve(dst));
  }
  EXPECT_EQ(Asked(), 2u) << "each destination once";
  EXPECT_EQ(dev_->neighbour_reuses(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_NO_FATAL_FAILURE(resolve("192.168.78.3"));  // the one remembered last, expired
  ASSERT_NO_FATAL_FAILURE(resolve("192.168.78.2"));  // expired too
  EXPECT_EQ(Asked(), 4u) << "both asked again after the window";
  EXPECT_EQ(dev_->neighbour_reuses(), 2u);
  for (CmId* id : ids) ASSERT_TRUE(ch_->DestroyId(id).ok());
}

// A failed or pending neighbour is asked again on every call (each one starts
// a resolution, as the kernel's), and a zero reuse asks every time.
TEST_F(NeighbourResolveTest, NoUsableAnswerOrNoReuseAsksEveryTime) {
  for (bool usable : {false, true}) {
    ASSERT_NO_FATAL_FAILURE(
        OpenWithTable(/*roce=*/true, usable ? mad::Duration::Zero() : mad::Duration::Seconds(3600)));
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked_.clear();
      if (!usable) answer_ = mad::WithErrno(absl::UnavailableError("netlink: EIO"), EIO);
    }
    for (int i = 0; i < 2; ++i) {
      CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
      ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.2")).ok());
      EXPECT_EQ(Next().event, usable ? EventType::kAddrResolved : EventType::kAddrError);
      ASSERT_TRUE(ch_->DestroyId(id).ok());
    }
    EXPECT_EQ(Asked(), 2u) << (usable ? "reuse 0" : "a failed answer");
    EXPECT_EQ(dev_->neighbour_reuses(), 0u);
    TearDown();
    answer_ = absl::optional<mad::Gid>();
  }
}

}  // namespace
}  // namespace uscm
