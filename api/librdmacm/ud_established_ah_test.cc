// A UD id's ESTABLISHED event (the SIDR_REP) carries the AH the program sends
// with (ah_attr): on RoCE its source GID index is the id's own entry, as
// uscm_source_gid_index gives it to rdma_create_qp's QP and rdma_init_qp_attr's
// AV (one global address on two netdevs: the route's netdev), not the
// address's first entry in the port's table.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <functional>
#include <memory>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"  // Ipv4, NewNonBlockingChannel
#include "api/librdmacm/ud_ah.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/transport.h"
#include "sa/sim_sa.h"

namespace uscm::librdmacm {
namespace {

ibv_gid Gid(const char* text) {
  ibv_gid g{};
  inet_pton(AF_INET6, text, g.raw);
  return g;
}

// What rxe and the switch do for a RoCE MAD (the GID's MAC): the simulated
// fabric delivers by LID, so every send goes to the peer's.
class ToPeer : public mad::ForwardingTransport {
 public:
  ToPeer(mad::Transport& inner, uint16_t peer_lid) : ForwardingTransport(inner), lid_(peer_lid) {}
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    mad::MadAddress by_lid = to;
    by_lid.lid = lid_;
    by_lid.has_grh = false;
    return ForwardingTransport::Send(by_lid, mad);
  }

 private:
  uint16_t lid_;
};

// The drop-in's port (host1): 10.0.0.1 on eth0 (ifindex 2, GID entry 0) and
// on eth0.100 (3, entry 1); the route to the peer leaves on eth0.100. The
// peer (host2, uscm's own API on InfiniBand addressing) answers SIDR_REQs.
class UdEstablishedAhTest : public ::testing::Test {
 protected:
  UdEstablishedAhTest() : sched_(31) {}
  void SetUp() override {
    auto net = testing::OpenTwoHostQp1s(sched_);
    ASSERT_TRUE(net.ok()) << net.status();
    net_ = std::move(*net);
    sim::SimTransport* mine = net_.host1.get();
    sim::SimTransport* theirs = net_.host2.get();
    DeviceOptions op;
    op.local_ips = {*Address::Parse("10.0.0.2")};
    auto peer = Device::CreateSimulated(sched_, *theirs, [theirs] { return theirs->pending() > 0; },
                                        op);
    ASSERT_TRUE(peer.ok()) << peer.status();
    peer_ = std::move(*peer);
    auto peer_ch = peer_->CreateEventChannel();
    ASSERT_TRUE(peer_ch.ok());
    peer_ch_ = std::move(*peer_ch);

    DeviceOptions o;
    o.roce = true;
    o.roce_gids = {*mad::Gid::Parse("::ffff:10.0.0.1"), *mad::Gid::Parse("::ffff:10.0.0.1")};
    o.roce_gid_ifindexes = {2, 3};
    o.local_ips = {*Address::Parse("10.0.0.1")};
    o.route_to = [](const Address&) -> absl::optional<DeviceOptions::Route> {
      return DeviceOptions::Route{*Address::Parse("10.0.0.1"), 3};
    };
    to_peer_ = std::make_unique<ToPeer>(*mine, peer_->port().lid);
    auto dev = Device::CreateSimulated(sched_, *to_peer_, [mine] { return mine->pending() > 0; }, o);
    ASSERT_TRUE(dev.ok()) << dev.status();
    device_ = std::move(*dev);
    handle_ = uscm_device_wrap(device_.get());
    Addr16 ip{};
    ip[10] = ip[11] = 0xff;
    inet_pton(AF_INET, "10.0.0.1", &ip[12]);
    ASSERT_EQ(UseDevicesForTesting({handle_}, {{ip}}), 0) << strerror(errno);
    SetPortGidsReaderForTesting([](ibv_context*, uint8_t) {
      PortGids p;
      p.ethernet = true;
      p.active_mtu = IBV_MTU_1024;
      p.table = {{Gid("::ffff:10.0.0.1"), true, 2}, {Gid("::ffff:10.0.0.1"), true, 3}};
      return p;
    });
    ch_ = NewNonBlockingChannel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    if (ch_ != nullptr) DestroyDrainedChannel(ch_);
    SetPortGidsReaderForTesting(nullptr);
    ResetBackendForTesting();
    if (handle_ != nullptr) uscm_device_unwrap_free(handle_);
  }

  bool RunUntil(const std::function<bool()>& done) {
    return sched_.RunUntil(done, sched_.Now() + mad::Duration::Seconds(10)).ok();
  }
  // The next event of the drop-in's id, running the fabric until its port has one.
  rdma_cm_event* Next(rdma_cm_event_type want) {
    auto run_until = [this](const auto& ready) { return RunUntil(ready); };
    return NextPumpedEvent(ch_, PortChannelsForTesting()[0], run_until, want);
  }

  sim::Scheduler sched_;
  testing::TwoHostQp1s net_;
  std::unique_ptr<Device> peer_;
  std::unique_ptr<EventChannel> peer_ch_;
  std::unique_ptr<ToPeer> to_peer_;
  std::unique_ptr<Device> device_;
  uscm_device* handle_ = nullptr;
  rdma_event_channel* ch_ = nullptr;
};

TEST_F(UdEstablishedAhTest, TheAhTakesTheIdsEntryNotTheAddresssFirst) {
  CmId* listener = *peer_ch_->CreateId(nullptr, PortSpace::kUdp);
  ASSERT_TRUE(listener->BindAddr(*Address::Parse("0.0.0.0:7000")).ok());
  ASSERT_TRUE(listener->Listen(1).ok());

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0) << strerror(errno);
  sockaddr_in dst = Ipv4("10.0.0.2", 7000);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED)), 0);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED)), 0);
  EXPECT_EQ(uscm_source_gid_index(UscmIdOf(id, "test")), 1) << "eth0.100's entry, the route's";
  rdma_conn_param p = {};
  p.qp_num = 0x77;
  ASSERT_EQ(rdma_connect(id, &p), 0) << strerror(errno);

  ASSERT_TRUE(RunUntil([&] { return peer_ch_->queued() > 0; })) << "no SIDR_REQ";
  absl::StatusOr<Event*> req = peer_ch_->GetEvent();
  ASSERT_TRUE(req.ok()) << req.status();
  ASSERT_EQ((*req)->event, EventType::kConnectRequest);
  CmId* served = (*req)->id;
  ConnParam accept;
  accept.qp_num = 0x88;
  ASSERT_TRUE(served->Accept(accept).ok());
  ASSERT_TRUE(peer_ch_->AckEvent(*req).ok());

  rdma_cm_event* e = Next(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->param.ud.qp_num, 0x88u);
  EXPECT_EQ(e->param.ud.ah_attr.is_global, 1);
  EXPECT_EQ(e->param.ud.ah_attr.grh.sgid_index, 1)
      << "the id's entry (eth0.100), not the address's first (eth0: 0)";
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  absl::Status destroyed = peer_ch_->DestroyId(served);
  EXPECT_TRUE(destroyed.ok()) << destroyed;
  EXPECT_TRUE(peer_ch_->DestroyId(listener).ok());
}

}  // namespace
}  // namespace uscm::librdmacm
