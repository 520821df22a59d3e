#include "tools/demo_ibsim.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/pcap_writer.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/printer.h"
#include "tools/cli.h"
#include "tools/ibsim_tool.h"
#include "tools/real_host.h"
#include "tools/sim_world.h"

namespace uscm::tools {
namespace {

constexpr uint64_t kServiceAccept = 0x0000000001060000ULL | 18515;
constexpr uint64_t kServiceReject = 0x0000000001060000ULL | 18516;
constexpr uint32_t kEceVendor = 0x15B3;
constexpr uint32_t kEceOptions = 0x1;
constexpr char kReady[] = "demo-ready";

std::vector<uint8_t> Bytes(absl::string_view s) { return {s.begin(), s.end()}; }
std::string Hex(uint64_t v) { return absl::StrFormat("0x%016x", v); }

// Child output: "@<monotonic ns> <text>", one line each, flushed at once.
void Line(mad::TimePoint t, const std::string& text) {
  absl::PrintF("@%d %s\n", t.nanos(), text);
  std::fflush(stdout);
}

// Shows what crosses a host's transport: every MAD it sends, and the MADs it
// receives from the SM's LID (the SA, whose side is not tapped). Each MAD
// also goes to the host's capture.
class LineTap final : public mad::ForwardingTransport {
 public:
  LineTap(mad::Transport& inner, std::string name, mad::capture::PcapWriter* pcap)
      : ForwardingTransport(inner), name_(std::move(name)), pcap_(pcap) {}

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    // Stamped before the send: the receiver may log the MAD's effect before
    // Send() returns here.
    const mad::TimePoint now = clock_.Now();
    absl::Status s = inner_.Send(to, mad);
    if (s.ok()) {
      Show(now, absl::StrCat(name_, " -> ", NameOf(to.lid)), mad,
           mad::capture::OutgoingHeaders(port(), to));
    }
    return s;
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override {
    return inner_.Drain(
        [&](const mad::ReceivedMad& m) {
          if (m.from.lid == port().sm_lid) {
            Show(clock_.Now(), absl::StrCat("OpenSM -> ", name_), m.data,
                 mad::capture::IncomingHeaders(port(), m.from));
          }
          sink(m);
        },
        max);
  }
  void Name(uint16_t lid, std::string name) { names_.emplace_back(lid, std::move(name)); }

 private:
  std::string NameOf(uint16_t lid) const {
    if (lid == port().sm_lid) return "OpenSM";
    for (const auto& [l, n] : names_) {
      if (l == lid) return n;
    }
    return absl::StrCat("lid ", lid);
  }
  void Show(mad::TimePoint now, const std::string& route, std::span<const uint8_t> mad,
            const mad::capture::UdHeaders& headers) {
    Line(now, absl::StrFormat("%-18s %s", route, mad::wire::Summary(mad)));
    if (pcap_ == nullptr) return;
    auto packet = mad::capture::WrapMad(headers, mad);
    if (packet.ok()) (void)pcap_->WritePacket(now, *packet);
  }

  std::string name_;
  mad::capture::PcapWriter* pcap_;
  mad::RealClock clock_;
  std::vector<std::pair<uint16_t, std::string>> names_;
};

class Story {
 public:
  Story(RealHost& h, std::string me, std::string peer)
      : h_(h), me_(std::move(me)), peer_(std::move(peer)) {}

  absl::Status RunServer() {
    h_.on_cm_event = [this](mad::TimePoint now, const cm::CmEvent& e) { OnServer(now, e); };
    auto l1 = h_.cm().Listen(kServiceAccept, ~0ULL, 16, false);
    auto l2 = h_.cm().Listen(kServiceReject, ~0ULL, 16, false);
    if (!l1.ok()) return l1.status();
    if (!l2.ok()) return l2.status();
    accept_listen_ = *l1;
    Event(h_.Now(), absl::StrCat("listening on service ", Hex(kServiceAccept), " (accepts) and ",
                                 Hex(kServiceReject), " (rejects)"));
    absl::PrintF("%s\n", kReady);
    std::fflush(stdout);
    return Run("the server's part");
  }

  absl::Status RunClient(uint16_t peer_lid) {
    h_.on_cm_event = [this](mad::TimePoint now, const cm::CmEvent& e) { OnClient(now, e); };
    h_.on_sa_result = [this](mad::TimePoint now, sa::SaResult r) { OnSa(now, std::move(r)); };
    Event(h_.Now(), absl::StrCat("path query to LID ", peer_lid));
    sa::PathQuery q;
    q.Slid(h_.port().lid).Dlid(peer_lid);
    auto id = h_.sa().GetPath(h_.Now(), q);
    if (!id.ok()) return id.status();
    h_.Kick();
    return Run("the client's part");
  }

 private:
  absl::Status Run(const char* what) {
    absl::Status s = h_.RunUntil([this] { return done_ || !error_.ok(); },
                                 mad::Duration::Seconds(60), what);
    if (!error_.ok()) return error_;
    if (!s.ok()) return absl::DeadlineExceededError(absl::StrCat(s.message(), " (step ", step_, ")"));
    return absl::OkStatus();
  }
  void Event(mad::TimePoint t, const std::string& what) {
    Line(t, absl::StrFormat("%-18s * %s", me_, what));
  }
  void Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
  }

  void OnSa(mad::TimePoint now, sa::SaResult r) {
    if (!r.status.ok()) return Fail(r.status);
    if (!r.paths.empty()) {
      const auto& p = r.paths[0];
      path_ = PathFromRecord(p);
      Event(now, absl::StrFormat("path: SLID %d -> DLID %d, MTU enum %d, rate enum %d, SL %d, "
                                 "PacketLifeTime %d",
                                 p.slid, p.dlid, static_cast<int>(p.mtu), p.rate, p.sl,
                                 p.packet_life_time));
      return Connect(now, kServiceAccept, "hello from hostA", true);
    }
    if (!r.group.has_value()) return;
    if (step_ == 4) {
      mgid_ = r.group->mgid;
      Event(now, absl::StrFormat("joined multicast group %s (MLID 0x%04x, Q_Key 0x%08x)",
                                 mgid_.ToString(), r.group->mlid, r.group->qkey));
      step_ = 5;
      Event(now, "leaving the group");
      mad::wire::JoinState full(mad::wire::JoinState::kFullMember);
      if (auto id = h_.sa().Leave(now, mgid_, h_.port().gid, full); !id.ok()) Fail(id.status());
    } else if (step_ == 5) {
      Event(now, absl::StrCat("left multicast group ", r.group->mgid.ToString()));
      step_ = 6;
      Event(now, "disconnecting the first connection");
      if (auto s = h_.cm().Disconnect(now, conn1_, Bytes("bye")); !s.ok()) Fail(s);
    }
  }

  void Connect(mad::TimePoint now, uint64_t service, absl::string_view pd, bool ece) {
    cm::ConnectParams p;
    p.service_id = service;
    p.primary = path_;
    p.qpn = 0x000100 + step_;
    p.starting_psn = 0x1000 * (step_ + 1);
    p.responder_resources = 4;
    p.initiator_depth = 4;
    p.private_data = Bytes(pd);
    if (ece) p.ece = cm::Ece{kEceVendor, kEceOptions};
    Event(now, absl::StrCat("connect to service ", Hex(service), ", private data ",
                            Printable(p.private_data),
                            ece ? absl::StrFormat(", ECE vendor 0x%06x options 0x%x", kEceVendor,
                                                  kEceOptions)
                                : std::string()));
    auto id = h_.cm().Connect(now, p);
    if (!id.ok()) return Fail(id.status());
    if (step_ == 0) conn1_ = *id;
    step_ = step_ == 0 ? 1 : 3;
  }

  void OnClient(mad::TimePoint now, const cm::CmEvent& e) {
    const std::string what = absl::StrCat("CM event ", cm::CmEventTypeName(e.type));
    switch (e.type) {
      case cm::CmEventType::kConnectResponse:
        Event(now, absl::StrFormat("%s: private data %s, ECE vendor 0x%06x options 0x%x; "
                                   "sending RTU",
                                   what, Printable(e.private_data.bytes()),
                                   e.remote_ece.vendor_id, e.remote_ece.options));
        if (auto s = h_.cm().Rtu(now, e.conn); !s.ok()) Fail(s);
        return;
      case cm::CmEventType::kEstablished:
        Event(now, what + ": connection 1 is up");
        step_ = 2;
        return Connect(now, kServiceReject, "may I?", false);
      case cm::CmEventType::kRejected: {
        const char* name = mad::wire::RejReasonName(static_cast<mad::wire::RejReason>(e.status));
        Event(now, absl::StrFormat("%s: reason %d (%s), private data %s", what, e.status,
                                   name ? name : "unknown", Printable(e.private_data.bytes())));
        (void)h_.cm().Destroy(now, e.conn);
        step_ = 4;
        Event(now, "joining a new multicast group (OpenSM assigns the MGID)");
        sa::McJoin j;
        j.port_gid = h_.port().gid;
        j.qkey = 0x00010000;
        if (auto id = h_.sa().Join(now, j); !id.ok()) Fail(id.status());
        return;
      }
      case cm::CmEventType::kDisconnected:
        Event(now, what + ": DREP received, entering TimeWait");
        return;
      case cm::CmEventType::kTimewaitExit:
        Event(now, what + ": connection 1 is gone");
        (void)h_.cm().Destroy(now, e.conn);
        done_ = true;
        return;
      default:
        Event(now, absl::StrCat(what, " status ", e.status));
        if (e.type == cm::CmEventType::kUnreachable) {
          Fail(absl::UnavailableError(peer_ + " did not answer"));
        }
    }
  }

  void OnServer(mad::TimePoint now, const cm::CmEvent& e) {
    const std::string what = absl::StrCat("CM event ", cm::CmEventTypeName(e.type));
    switch (e.type) {
      case cm::CmEventType::kConnectRequest:
        Event(now, absl::StrFormat("%s: service %s, private data %s, ECE vendor 0x%06x "
                                   "options 0x%x",
                                   what, Hex(e.req.service_id), Printable(e.private_data.bytes()),
                                   e.remote_ece.vendor_id, e.remote_ece.options));
        if (e.listen == accept_listen_) {
          cm::AcceptParams ap;
          ap.qpn = 0x000200;
          ap.starting_psn = 0x2000;
          ap.responder_resources = 4;
          ap.initiator_depth = 4;
          ap.ece_options = kEceOptions;
          ap.private_data = Bytes("welcome, hostA");
          Event(now, "accepting with private data \"welcome, hostA\" and ECE");
          if (auto s = h_.cm().Accept(now, e.conn, ap); !s.ok()) Fail(s);
        } else {
          Event(now, "rejecting: reason 28 (consumer reject), private data \"busy, try later\"");
          if (auto s = h_.cm().Reject(now, e.conn, mad::wire::RejReason::kConsumerReject,
                                      Bytes("busy, try later"));
              !s.ok()) {
            Fail(s);
          }
          (void)h_.cm().Destroy(now, e.conn);
        }
        return;
      case cm::CmEventType::kEstablished:
        Event(now, what + ": RTU received, connection 1 is up");
        return;
      case cm::CmEventType::kDisconnected:
        Event(now, absl::StrCat(what, ": DREQ with private data ",
                                Printable(e.private_data.bytes()), "; answering DREP"));
        if (auto s = h_.cm().Disconnect(now, e.conn); !s.ok()) Fail(s);
        return;
      case cm::CmEventType::kTimewaitExit:
        Event(now, what + ": connection 1 is gone");
        (void)h_.cm().Destroy(now, e.conn);
        done_ = true;
        return;
      default:
        Event(now, absl::StrCat(what, " status ", e.status));
    }
  }

  RealHost& h_;
  std::string me_, peer_;
  cm::ListenId accept_listen_;
  cm::PathInfo path_;
  cm::ConnId conn1_;
  mad::Gid mgid_;
  int step_ = 0;
  bool done_ = false;
  absl::Status error_;
};

struct TimedLine {
  int64_t ns;
  int order;
  std::string text;
};

void Collect(const std::string& out, int base, std::vector<TimedLine>* lines) {
  int order = base;
  for (absl::string_view l : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (l.empty() || l[0] != '@') continue;
    const size_t sp = l.find(' ');
    int64_t ns = 0;
    if (sp == absl::string_view::npos || !absl::SimpleAtoi(l.substr(1, sp - 1), &ns)) continue;
    lines->push_back({ns, order++, std::string(l.substr(sp + 1))});
  }
}

}  // namespace

int RunDemoRole(const FabricSpec& spec, bool server, int peer_lid, const std::string& capture) {
  std::unique_ptr<mad::capture::PcapWriter> writer;
  if (!capture.empty()) {
    auto w = mad::capture::PcapWriter::Create(capture);
    if (!w.ok()) return Failure("demo", std::string(w.status().message()));
    writer = std::move(*w);
  }
  const std::string me = server ? "hostB" : "hostA";
  const std::string peer = server ? "hostA" : "hostB";
  LineTap* tap = nullptr;
  auto host = RealHost::Open(spec, RealTransportOptions{}, [&](mad::Transport& inner) {
    auto t = std::make_unique<LineTap>(inner, me, writer.get());
    tap = t.get();
    return t;
  });
  if (!host.ok()) return Failure("demo", std::string(host.status().message()));
  if (peer_lid > 0) tap->Name(static_cast<uint16_t>(peer_lid), peer);
  Story story(**host, me, peer);
  absl::Status s = server ? story.RunServer() : story.RunClient(static_cast<uint16_t>(peer_lid));
  if (writer != nullptr) {
    if (absl::Status c = writer->Close(); !c.ok() && s.ok()) s = c;
  }
  if (!s.ok()) return Failure("demo", std::string(s.message()));
  return kExitOk;
}

int RunDemoIbsim(const std::string& capture) {
  auto fabric = StartToolFabric("demo");
  if (!fabric.ok()) return Failure("demo", std::string(fabric.status().message()));
  auto self = SelfExecutable();
  if (!self.ok()) return Failure("demo", std::string(self.status().message()));
  IbsimFabric& f = **fabric;
  const int lid_a = f.lids().at("hostA"), lid_b = f.lids().at("hostB");
  const std::string cap_a = f.dir() + "/hostA.pcap", cap_b = f.dir() + "/hostB.pcap";
  auto server = f.Spawn("hostB", {*self, "demo", absl::StrCat("--fabric=", kIbsimFabric),
                                  "--role=server", absl::StrCat("--peer-lid=", lid_a),
                                  "--capture=" + cap_b});
  if (!server.ok()) return Failure("demo", std::string(server.status().message()));
  if (auto r = server->WaitForLine(kReady, 60000); !r.ok()) {
    return Failure("demo", absl::StrCat("the server on hostB: ", r.status().message()));
  }
  auto client = f.Run("hostA", {*self, "demo", absl::StrCat("--fabric=", kIbsimFabric),
                                "--role=client", absl::StrCat("--peer-lid=", lid_b),
                                "--capture=" + cap_a},
                      120000);
  if (!client.ok()) return Failure("demo", std::string(client.status().message()));
  auto served = server->Wait(client->exit_code == 0 ? 60000 : 1000);
  std::vector<TimedLine> lines;
  Collect(client->out, 0, &lines);
  if (served.ok()) Collect(served->out, 1 << 20, &lines);
  std::stable_sort(lines.begin(), lines.end(), [](const TimedLine& a, const TimedLine& b) {
    return a.ns != b.ns ? a.ns < b.ns : a.order < b.order;
  });
  absl::PrintF("uscm demo on ibsim: hostA (LID %d) and hostB (LID %d) behind switch sw1; "
               "OpenSM on node sm\ntime is wall time since the first line; '->' lines are real "
               "MADs, '*' lines are events\n\n",
               lid_a, lid_b);
  const int64_t t0 = lines.empty() ? 0 : lines.front().ns;
  int mads = 0;
  for (const TimedLine& l : lines) {
    absl::PrintF("[%12.3f us] %s\n", static_cast<double>(l.ns - t0) / 1e3, l.text);
    if (l.text.find(" * ") == std::string::npos) ++mads;
  }
  ForwardStderr(client->err);
  if (served.ok()) ForwardStderr(served->err);
  if (client->exit_code != 0) return kExitFailure;
  if (!served.ok()) return Failure("demo", std::string(served.status().message()));
  if (served->exit_code != 0) return kExitFailure;
  // One capture from the two hosts' captures, in time order.
  uint64_t packets = 0;
  if (!capture.empty()) {
    std::vector<mad::capture::PcapRecord> records;
    for (const std::string& path : {cap_a, cap_b}) {
      auto c = mad::capture::ReadPcapFile(path);
      if (!c.ok()) return Failure("demo", std::string(c.status().message()));
      for (auto& r : c->records) records.push_back(std::move(r));
    }
    std::stable_sort(records.begin(), records.end(),
                     [](const auto& a, const auto& b) { return a.time < b.time; });
    auto w = mad::capture::PcapWriter::Create(capture);
    if (!w.ok()) return Failure("demo", std::string(w.status().message()));
    for (const auto& r : records) {
      if (auto s = (*w)->WritePacket(r.time, r.packet); !s.ok()) {
        return Failure("demo", std::string(s.message()));
      }
    }
    if (auto s = (*w)->Close(); !s.ok()) return Failure("demo", std::string(s.message()));
    packets = records.size();
  }
  absl::PrintF("\n%d MADs, %d events, %.3f ms of wall time.\n", mads,
               static_cast<int>(lines.size()) - mads,
               lines.empty() ? 0.0 : static_cast<double>(lines.back().ns - t0) / 1e6);
  if (!capture.empty()) {
    absl::PrintF("Capture: %s (%d packets) - open it with: wireshark %s   or: uscm dump %s\n",
                 capture, packets, capture, capture);
  }
  return kExitOk;
}

}  // namespace uscm::tools
