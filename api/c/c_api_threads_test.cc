// "API calls are safe from any thread; a progress thread is optional"
// (issue 5): two real Devices (cm::RealNode, epoll + timerfd) joined by an
// in-memory loopback transport, each driven by its progress thread
// (Device::StartProgressThread; the C API has no call for it: the C++ owner
// of the device starts it, as for uscm_set_default_device). Four threads at
// once, each with its own channels and AF_IB service ID, create ids, connect,
// accept, establish, disconnect and destroy N connections through the C API
// (route from the IB_PATH option, no SA). Every connection must complete and
// every table must be empty at the end. Run under --config=asan too.
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "gtest/gtest.h"
#include "mad/gid.h"
#include "mad/transport.h"
#include "mad/wire/path_record.h"

namespace uscm {
namespace {

// Two of these form a wire: Send on one is readable (fd) on the other.
class LoopTransport final : public mad::Transport {
 public:
  explicit LoopTransport(mad::LocalPort port)
      : port_(std::move(port)), efd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    caps_.name = "loop";
  }
  ~LoopTransport() override { close(efd_); }
  void set_peer(LoopTransport* p) { peer_ = p; }

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    if (mad.size() > mad::kMadSize) return absl::InvalidArgumentError("MAD too long");
    mad::MadAddress from;
    from.lid = port_.lid;
    from.gid = port_.gid;
    from.qpn = to.qpn;
    peer_->Deliver(from, mad);
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) override {
    std::deque<Item> got;
    {
      std::lock_guard<std::mutex> l(mu_);
      uint64_t v;
      (void)!read(efd_, &v, sizeof v);
      while (!q_.empty() && got.size() < max) {
        got.push_back(std::move(q_.front()));
        q_.pop_front();
      }
      if (!q_.empty()) Signal();
    }
    for (const Item& i : got) sink(mad::ReceivedMad{i.from, {i.mad.data(), i.len}});
    return got.size();
  }
  int fd() const override { return efd_; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }

 private:
  struct Item {
    mad::MadAddress from;
    std::array<uint8_t, mad::kMadSize> mad{};
    size_t len = 0;
  };
  void Deliver(const mad::MadAddress& from, std::span<const uint8_t> mad) {
    Item i;
    i.from = from;
    i.len = mad.size();
    memcpy(i.mad.data(), mad.data(), mad.size());
    std::lock_guard<std::mutex> l(mu_);
    q_.push_back(std::move(i));
    Signal();
  }
  void Signal() {
    const uint64_t one = 1;
    (void)!write(efd_, &one, sizeof one);
  }

  mad::LocalPort port_;
  mad::TransportCaps caps_;
  int efd_;
  LoopTransport* peer_ = nullptr;
  std::mutex mu_;
  std::deque<Item> q_;
};

mad::LocalPort Port(uint16_t lid, uint64_t guid) {
  mad::LocalPort p;
  p.ca_name = "loop" + std::to_string(lid);
  p.lid = lid;
  p.node_guid = guid;
  p.gid = mad::Gid::FromParts(0xfe80000000000000ull, guid);
  p.pkeys = {0xFFFF};
  return p;
}

constexpr int kThreads = 4;
constexpr int kConnsPerThread = 25;
constexpr uint64_t kSid = 0x1000000000000000ull | 0x5500;

uscm_addr IbAddr(const mad::LocalPort& p, uint64_t sid) {
  uscm_addr a{};
  a.family = USCM_AF_IB;
  memcpy(a.gid, p.gid.raw.data(), 16);
  a.lid = p.lid;
  a.pkey = 0xFFFF;
  a.service_id = sid;
  return a;
}

// One worker: its own channels on both devices; every failure is recorded
// as text (gtest assertions are thread-safe, but a message per step helps).
class Worker {
 public:
  Worker(int n, uscm_device* da, uscm_device* db, const mad::LocalPort& pa,
         const mad::LocalPort& pb)
      : n_(n), pa_(pa), pb_(pb) {
    ch_[0] = uscm_create_event_channel_on(da);
    ch_[1] = uscm_create_event_channel_on(db);
  }
  ~Worker() {
    uscm_destroy_event_channel(ch_[0]);
    uscm_destroy_event_channel(ch_[1]);
  }

  bool Run() {
    if (ch_[0] == nullptr || ch_[1] == nullptr) return Error("create_event_channel");
    uscm_cm_id* listener = nullptr;
    if (uscm_create_id(ch_[1], &listener, nullptr, USCM_PS_IB) != 0) return Error("create_id");
    const uscm_addr server = IbAddr(pb_, kSid + n_);
    if (uscm_bind_addr(listener, &server) != 0) return Error("bind_addr");
    if (uscm_listen(listener, 8) != 0) return Error("listen");
    for (int i = 0; i < kConnsPerThread; ++i) {
      if (!OneConnection(server, i)) break;
      ++completed;
    }
    if (uscm_destroy_id(listener) != 0) return Error("destroy listener");
    return true;
  }

  int completed = 0;
  std::string error;

 private:
  bool OneConnection(const uscm_addr& server, int i) {
    uscm_cm_id* id = nullptr;
    if (uscm_create_id(ch_[0], &id, this, USCM_PS_IB) != 0) return Error("create_id");
    if (uscm_resolve_addr(id, nullptr, &server, 2000) != 0) return Error("resolve_addr");
    if (!Expect(0, USCM_CM_EVENT_ADDR_RESOLVED, id)) return false;
    mad::wire::PathRecord r;
    r.sgid = pa_.gid;
    r.dgid = pb_.gid;
    r.slid = pa_.lid;
    r.dlid = pb_.lid;
    r.pkey = 0xFFFF;
    r.reversible = true;
    r.mtu = mad::wire::Mtu::k2048;
    r.packet_life_time = 10;
    uscm_path_data pd{};
    pd.flags = USCM_PATH_FLAG_GMP | USCM_PATH_FLAG_PRIMARY | USCM_PATH_FLAG_BIDIRECTIONAL;
    if (!r.Emit(pd.path_rec).ok()) return Error("PathRecord::Emit");
    if (uscm_set_option(id, USCM_OPTION_IB, USCM_OPTION_IB_PATH, &pd, sizeof pd) != 0) {
      return Error("set_option(IB_PATH)");
    }
    if (uscm_resolve_route(id, 2000) != 0) return Error("resolve_route");
    if (!Expect(0, USCM_CM_EVENT_ROUTE_RESOLVED, id)) return false;
    const uint8_t data[4] = {static_cast<uint8_t>(n_), static_cast<uint8_t>(i), 0xC0, 0xDE};
    uscm_conn_param cp{};
    cp.private_data = data;
    cp.private_data_len = sizeof data;
    cp.qp_num = static_cast<uint32_t>(0x1000 + n_ * 0x100 + i);
    if (uscm_connect(id, &cp) != 0) return Error("connect");
    uscm_cm_id* child = nullptr;
    uscm_cm_event* req = Wait(1, USCM_CM_EVENT_CONNECT_REQUEST);
    if (req == nullptr) return false;
    child = req->id;
    const bool data_ok = req->param.conn.private_data_len >= sizeof data &&
                         memcmp(req->param.conn.private_data, data, sizeof data) == 0;
    uscm_ack_cm_event(req);
    if (!data_ok) return Error("CONNECT_REQUEST private data");
    uscm_conn_param ap{};
    ap.qp_num = static_cast<uint32_t>(0x8000 + n_ * 0x100 + i);
    if (uscm_accept(child, &ap) != 0) return Error("accept");
    if (!Expect(0, USCM_CM_EVENT_CONNECT_RESPONSE, id)) return false;
    if (uscm_establish(id) != 0) return Error("establish");
    if (!Expect(1, USCM_CM_EVENT_ESTABLISHED, child)) return false;
    // Alternate which side disconnects first.
    uscm_cm_id* first = i % 2 == 0 ? id : child;
    uscm_cm_id* second = first == id ? child : id;
    const int first_side = first == id ? 0 : 1;
    if (uscm_disconnect(first) != 0) return Error("disconnect (DREQ)");
    if (!Expect(1 - first_side, USCM_CM_EVENT_DISCONNECTED, second)) return false;
    if (uscm_disconnect(second) != 0) return Error("disconnect (DREP)");
    if (!Expect(first_side, USCM_CM_EVENT_DISCONNECTED, first)) return false;
    if (uscm_destroy_id(child) != 0) return Error("destroy passive id");
    if (uscm_destroy_id(id) != 0) return Error("destroy active id");
    return true;
  }

  // The next event on side h other than TIMEWAIT_EXIT (acked and skipped);
  // nullptr (and an error) after 30 s or on another type.
  uscm_cm_event* Wait(int h, uscm_cm_event_type want) {
    for (;;) {
      pollfd p{ch_[h]->fd, POLLIN, 0};
      if (poll(&p, 1, 30000) != 1) {
        Error(std::string("no ") + uscm_event_str(want) + " within 30 s");
        return nullptr;
      }
      uscm_cm_event* e = nullptr;
      if (uscm_get_cm_event(ch_[h], &e) != 0) {
        if (errno == EAGAIN) continue;  // woken, but another wake took it
        Error("get_cm_event");
        return nullptr;
      }
      if (e->event == USCM_CM_EVENT_TIMEWAIT_EXIT) {
        uscm_ack_cm_event(e);
        continue;
      }
      if (e->event != want) {
        Error(std::string("expected ") + uscm_event_str(want) + ", got " +
              uscm_event_str(e->event) + " status " + std::to_string(e->status));
        uscm_ack_cm_event(e);
        return nullptr;
      }
      return e;
    }
  }
  bool Expect(int h, uscm_cm_event_type want, uscm_cm_id* id) {
    uscm_cm_event* e = Wait(h, want);
    if (e == nullptr) return false;
    const bool same = e->id == id;
    const int status = e->status;
    uscm_ack_cm_event(e);
    if (!same) return Error(std::string(uscm_event_str(want)) + " for another id");
    if (status != 0) return Error(std::string(uscm_event_str(want)) + " status " + std::to_string(status));
    return true;
  }
  bool Error(const std::string& what) {
    if (error.empty()) {
      error = "thread " + std::to_string(n_) + ", connection " + std::to_string(completed) +
              ": " + what + " (errno " + std::to_string(errno) + ", " + uscm_last_error() + ")";
    }
    return false;
  }

  int n_;
  mad::LocalPort pa_, pb_;
  uscm_event_channel* ch_[2] = {nullptr, nullptr};
};

TEST(CApiThreadsTest, FourThreadsConnectAcceptDisconnectDestroyWithProgressThreads) {
  LoopTransport ta(Port(1, 0x0002c90300000a0aull)), tb(Port(2, 0x0002c90300000b0bull));
  ta.set_peer(&tb);
  tb.set_peer(&ta);
  DeviceOptions oa, ob;
  oa.node.seed = 1;
  ob.node.seed = 2;
  auto da = Device::Create(ta, oa);
  auto db = Device::Create(tb, ob);
  ASSERT_TRUE(da.ok()) << da.status();
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*da)->StartProgressThread().ok());
  ASSERT_TRUE((*db)->StartProgressThread().ok());
  EXPECT_EQ((*da)->StartProgressThread().code(), absl::StatusCode::kAlreadyExists);
  uscm_device* ha = uscm_device_wrap(da->get());
  uscm_device* hb = uscm_device_wrap(db->get());

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::make_unique<Worker>(t, ha, hb, ta.port(), tb.port()));
  }
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->Run(); });
  for (std::thread& t : threads) t.join();
  int total = 0;
  for (auto& w : workers) {
    EXPECT_EQ(w->error, "");
    EXPECT_EQ(w->completed, kConnsPerThread);
    total += w->completed;
  }
  EXPECT_EQ(total, kThreads * kConnsPerThread);

  // The records in TimeWait go away on their own (the progress threads run
  // the timers): wait for every table to be empty.
  auto empty = [](Device& d) {
    std::lock_guard<std::mutex> l(d.node().mutex());
    const cm::CmEndpoint& cm = d.node().cm();
    return cm.connection_count() == 0 && cm.table_entries() == 0 && cm.listener_count() == 0 &&
           cm.timers_empty();
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!empty(**da) || !empty(**db)) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (Device* d : {da->get(), db->get()}) {
    EXPECT_TRUE(empty(*d)) << d->port().ca_name;
    EXPECT_EQ(d->id_count(), 0u) << d->port().ca_name;
    std::lock_guard<std::mutex> l(d->node().mutex());
    EXPECT_EQ(d->node().cm().counters().timeouts, 0u) << "nothing was lost or retried";
  }
  workers.clear();  // channels destroyed
  (*da)->StopProgressThread();
  (*db)->StopProgressThread();
  uscm_device_unwrap_free(ha);
  uscm_device_unwrap_free(hb);
}

}  // namespace
}  // namespace uscm
