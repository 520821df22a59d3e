// On RoCE every LID is 0: the router tells two peers that picked the same
// comm ID apart by the GID of their GRH, so each REQ is its own pending entry
// (and each gets its REJ when the listening process goes away).
#include <deque>
#include <vector>

#include "cm/router/router.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_message.h"

namespace uscm::router {
namespace {

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;

// A wire that hands out the MADs a test queues, from addresses it chooses,
// and keeps what the router sends.
class QueuedWire final : public mad::Transport {
 public:
  QueuedWire() { port_.link_layer = mad::LinkLayer::kEthernet; }
  void Queue(const mad::MadAddress& from, std::vector<uint8_t> mad) {
    queued_.push_back({from, std::move(mad)});
  }
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    sent_.push_back({to, std::vector<uint8_t>(mad.begin(), mad.end())});
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) override {
    size_t n = 0;
    for (; n < max && !queued_.empty(); ++n) {
      const Queued q = std::move(queued_.front());
      queued_.pop_front();
      sink(mad::ReceivedMad{q.from, q.mad});
    }
    return n;
  }
  int fd() const override { return -1; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }
  size_t sent() const { return sent_.size(); }

 private:
  struct Queued {
    mad::MadAddress from;
    std::vector<uint8_t> mad;
  };
  mad::TransportCaps caps_;
  mad::LocalPort port_;
  std::deque<Queued> queued_;
  std::vector<Queued> sent_;
};

mad::MadAddress RocePeer(uint8_t last_gid_byte) {
  mad::MadAddress a;
  a.lid = 0;
  a.has_grh = true;
  a.gid.raw[10] = 0xFF;
  a.gid.raw[11] = 0xFF;
  a.gid.raw[15] = last_gid_byte;
  return a;
}

std::vector<uint8_t> Req(uint32_t comm_id) {
  mad::wire::ReqRepr r;
  r.envelope.transaction_id = comm_id;
  r.local_comm_id = comm_id;
  r.service_id = kSid;
  r.local_qpn = 0x300;
  std::vector<uint8_t> mad(mad::kMadSize);
  EXPECT_TRUE(mad::wire::EmitCm(r, mad).ok());
  return mad;
}

TEST(RouterRoceKeyTest, TwoPeersWithOneCommIdAreTwoPendingRequests) {
  QueuedWire wire;
  Router router(wire, RouterOptions{}, [](uint8_t, std::span<const uint8_t>) {});
  auto welcome = router.AddClient();
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  const uint8_t slot = welcome->slot;
  router.HandleFrame(slot, EncodeClaim(FrameType::kClaim, ClaimFrame{1, kSid, ~uint64_t{0}}));
  ASSERT_EQ(router.claim_count(), 1u);

  wire.Queue(RocePeer(1), Req(0x1234));
  wire.Queue(RocePeer(2), Req(0x1234));  // another host, the same comm ID
  wire.Queue(RocePeer(2), Req(0x1234));  // that host's retransmission
  router.PollWire();
  EXPECT_EQ(router.tracked(slot), 2u) << "one entry per host";

  const size_t sent_before = wire.sent();
  router.RemoveClient(slot);
  EXPECT_EQ(router.counters().cleanup_rej, 2u);
  EXPECT_EQ(wire.sent(), sent_before + 2);
}

}  // namespace
}  // namespace uscm::router
