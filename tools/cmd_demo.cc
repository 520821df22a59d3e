// `uscm demo`: one story on the simulated fabric, every MAD and event on a
// timeline with virtual timestamps, and a capture file Wireshark opens.
//
//   host1 asks the SA for a path to host2; connects to service 1 with private
//   data and ECE (host2 accepts, REP carries its own private data and ECE
//   options; RTU); connects to service 2, which host2 rejects with a reason
//   and private data; both hosts join a multicast group and leave it; host1
//   disconnects the first connection (DREQ / DREP); TimeWait ends.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/capture/pcap_writer.h"
#include "mad/wire/cm_rej.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/demo_ibsim.h"
#include "tools/fabric_flags.h"
#include "tools/sim_world.h"

namespace uscm::tools {
namespace {

constexpr uint64_t kServiceAccept = 0x0000000001060000ULL | 18515;  // RDMA_PS_TCP port 18515
constexpr uint64_t kServiceReject = 0x0000000001060000ULL | 18516;
constexpr uint32_t kEceVendor = 0x15B3;  // Mellanox/NVIDIA, as rdma-core sends it
constexpr uint32_t kEceOptions = 0x1;

std::vector<uint8_t> Bytes(absl::string_view s) { return {s.begin(), s.end()}; }

std::string Hex(uint64_t v) { return absl::StrFormat("0x%016x", v); }

class DemoStory {
 public:
  DemoStory(SimWorld& world, Timeline& tl)
      : world_(world), tl_(tl), a_(*world.hosts()[0]), b_(*world.hosts()[1]) {}

  absl::Status Run() {
    a_.on_cm_event = [this](SimHost& h, TimePoint now, const cm::CmEvent& e) { OnActive(now, e); };
    b_.on_cm_event = [this](SimHost& h, TimePoint now, const cm::CmEvent& e) {
      OnPassive(now, e);
    };
    a_.on_sa_result = [this](SimHost& h, TimePoint now, sa::SaResult r) {
      OnSa(h, now, std::move(r));
    };
    b_.on_sa_result = a_.on_sa_result;

    auto l1 = b_.cm().Listen(kServiceAccept, ~0ULL, 16, false);
    auto l2 = b_.cm().Listen(kServiceReject, ~0ULL, 16, false);
    if (!l1.ok()) return l1.status();
    if (!l2.ok()) return l2.status();
    accept_listen_ = *l1;
    const TimePoint t0 = world_.scheduler().Now();
    tl_.Event(t0, b_.name(), absl::StrCat("listening on service ", Hex(kServiceAccept),
                                          " (accepts) and ", Hex(kServiceReject), " (rejects)"));
    tl_.Event(t0, a_.name(), absl::StrCat("path query to ", b_.port().gid.ToString()));
    auto q = a_.sa().GetPath(
        t0, sa::PathQuery::RdmaCm(a_.port().gid, b_.port().gid, 0xFFFF, kServiceAccept));
    if (!q.ok()) return q.status();
    a_.Touch();
    absl::Status s = world_.scheduler().RunUntil([this] { return done_ || !error_.ok(); },
                                                 t0 + Duration::Seconds(120));
    if (!error_.ok()) return error_;
    if (!s.ok()) return absl::DeadlineExceededError(absl::StrCat(
                         "the story stopped at step ", step_, ": ", s.message()));
    // Let TimeWait and everything else run out.
    s = world_.scheduler().RunUntilIdle(1'000'000);
    if (!s.ok()) return s;
    if (a_.cm().connection_count() != 0 || b_.cm().connection_count() != 0) {
      return absl::InternalError("connections left over after the story");
    }
    return absl::OkStatus();
  }

 private:
  void Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
  }

  void OnSa(SimHost& h, TimePoint now, sa::SaResult r) {
    if (!r.status.ok()) return Fail(r.status);
    if (!r.paths.empty()) {
      const auto& p = r.paths[0];
      path_ = PathFromRecord(p);
      tl_.Event(now, h.name(),
                absl::StrFormat("path: SLID %d -> DLID %d, MTU enum %d, rate enum %d, SL %d, "
                                "PacketLifeTime %d",
                                p.slid, p.dlid, static_cast<int>(p.mtu), p.rate, p.sl,
                                p.packet_life_time));
      Connect(now, kServiceAccept, "hello from host1", /*with_ece=*/true);
      return;
    }
    if (r.group.has_value()) {
      const sa::McGroup& g = *r.group;
      if (&h == &a_ && step_ == 4) {
        mgid_ = g.mgid;
        tl_.Event(now, h.name(), absl::StrFormat("joined multicast group %s (MLID 0x%04x, Q_Key 0x%08x)",
                                                 g.mgid.ToString(), g.mlid, g.qkey));
        step_ = 5;
        sa::McJoin j;
        j.mgid = mgid_;
        j.port_gid = b_.port().gid;
        j.create = false;
        if (auto id = b_.sa().Join(now, j); !id.ok()) return Fail(id.status());
        b_.Touch();
      } else if (&h == &b_ && step_ == 5) {
        tl_.Event(now, h.name(), absl::StrFormat("joined multicast group %s (MLID 0x%04x)",
                                                 g.mgid.ToString(), g.mlid));
        step_ = 6;
        tl_.Event(now, a_.name(), "leaving the group");
        tl_.Event(now, b_.name(), "leaving the group");
        mad::wire::JoinState full(mad::wire::JoinState::kFullMember);
        if (auto id = a_.sa().Leave(now, mgid_, a_.port().gid, full); !id.ok()) return Fail(id.status());
        if (auto id = b_.sa().Leave(now, mgid_, b_.port().gid, full); !id.ok()) return Fail(id.status());
        a_.Touch();
        b_.Touch();
      } else if (step_ == 6) {
        tl_.Event(now, h.name(), absl::StrCat("left multicast group ", g.mgid.ToString()));
        if (++leaves_ == 2) {
          step_ = 7;
          tl_.Event(now, a_.name(), "disconnecting the first connection");
          if (absl::Status s = a_.cm().Disconnect(now, conn1_, Bytes("bye")); !s.ok()) Fail(s);
          a_.Touch();
        }
      }
    }
  }

  void Connect(TimePoint now, uint64_t service, absl::string_view pd, bool with_ece) {
    cm::ConnectParams p;
    p.service_id = service;
    p.primary = path_;
    p.qpn = 0x000100 + step_;  // simulated data QP
    p.starting_psn = 0x1000 * (step_ + 1);
    p.responder_resources = 4;
    p.initiator_depth = 4;
    p.private_data = Bytes(pd);
    if (with_ece) p.ece = cm::Ece{kEceVendor, kEceOptions};
    tl_.Event(now, a_.name(),
              absl::StrCat("connect to service ", Hex(service), ", private data ",
                           Printable(p.private_data),
                           with_ece ? absl::StrFormat(", ECE vendor 0x%06x options 0x%x",
                                                      kEceVendor, kEceOptions)
                                    : std::string()));
    auto id = a_.cm().Connect(now, p);
    if (!id.ok()) return Fail(id.status());
    if (step_ == 0) conn1_ = *id;
    step_ = step_ == 0 ? 1 : 3;
  }

  void OnActive(TimePoint now, const cm::CmEvent& e) {
    std::string what = absl::StrCat("CM event ", cm::CmEventTypeName(e.type));
    switch (e.type) {
      case cm::CmEventType::kConnectResponse:
        tl_.Event(now, a_.name(),
                  absl::StrFormat("%s: private data %s, ECE vendor 0x%06x options 0x%x; sending RTU",
                                  what, Printable(e.private_data.bytes()),
                                  e.remote_ece.vendor_id, e.remote_ece.options));
        if (absl::Status s = a_.cm().Rtu(now, e.conn); !s.ok()) Fail(s);
        return;
      case cm::CmEventType::kEstablished:
        tl_.Event(now, a_.name(), what + ": connection 1 is up");
        step_ = 2;
        Connect(now, kServiceReject, "may I?", /*with_ece=*/false);
        return;
      case cm::CmEventType::kRejected: {
        auto reason = static_cast<mad::wire::RejReason>(e.status);
        const char* name = mad::wire::RejReasonName(reason);
        tl_.Event(now, a_.name(),
                  absl::StrFormat("%s: reason %d (%s), private data %s", what, e.status,
                                  name ? name : "unknown", Printable(e.private_data.bytes())));
        (void)a_.cm().Destroy(now, e.conn);
        step_ = 4;
        tl_.Event(now, a_.name(), "joining a new multicast group (SA assigns the MGID)");
        sa::McJoin j;
        j.port_gid = a_.port().gid;
        j.qkey = 0x00010000;
        if (auto id = a_.sa().Join(now, j); !id.ok()) Fail(id.status());
        return;
      }
      case cm::CmEventType::kDisconnected:
        tl_.Event(now, a_.name(), what + ": DREP received, entering TimeWait");
        return;
      case cm::CmEventType::kTimewaitExit:
        tl_.Event(now, a_.name(), what + ": connection 1 is gone");
        (void)a_.cm().Destroy(now, e.conn);
        done_ = true;
        return;
      default:
        tl_.Event(now, a_.name(), absl::StrCat(what, " status ", e.status));
        if (e.type == cm::CmEventType::kUnreachable) {
          Fail(absl::UnavailableError("host2 did not answer"));
        }
    }
  }

  void OnPassive(TimePoint now, const cm::CmEvent& e) {
    std::string what = absl::StrCat("CM event ", cm::CmEventTypeName(e.type));
    switch (e.type) {
      case cm::CmEventType::kConnectRequest: {
        tl_.Event(now, b_.name(),
                  absl::StrFormat("%s: service %s, private data %s, ECE vendor 0x%06x options 0x%x",
                                  what, Hex(e.req.service_id), Printable(e.private_data.bytes()),
                                  e.remote_ece.vendor_id, e.remote_ece.options));
        if (e.listen == accept_listen_) {
          cm::AcceptParams ap;
          ap.qpn = 0x000200;
          ap.starting_psn = 0x2000;
          ap.responder_resources = 4;
          ap.initiator_depth = 4;
          ap.ece_options = kEceOptions;
          ap.private_data = Bytes("welcome, host1");
          tl_.Event(now, b_.name(), "accepting with private data \"welcome, host1\" and ECE");
          if (absl::Status s = b_.cm().Accept(now, e.conn, ap); !s.ok()) Fail(s);
        } else {
          tl_.Event(now, b_.name(),
                    "rejecting: reason 28 (consumer reject), private data \"busy, try later\"");
          if (absl::Status s = b_.cm().Reject(now, e.conn, mad::wire::RejReason::kConsumerReject,
                                              Bytes("busy, try later"));
              !s.ok()) {
            Fail(s);
          }
          (void)b_.cm().Destroy(now, e.conn);
        }
        return;
      }
      case cm::CmEventType::kEstablished:
        tl_.Event(now, b_.name(), what + ": RTU received, connection 1 is up");
        return;
      case cm::CmEventType::kDisconnected:
        tl_.Event(now, b_.name(),
                  absl::StrCat(what, ": DREQ with private data ", Printable(e.private_data.bytes()),
                               "; answering DREP"));
        if (absl::Status s = b_.cm().Disconnect(now, e.conn); !s.ok()) Fail(s);
        return;
      case cm::CmEventType::kTimewaitExit:
        tl_.Event(now, b_.name(), what + ": connection 1 is gone");
        (void)b_.cm().Destroy(now, e.conn);
        return;
      default:
        tl_.Event(now, b_.name(), absl::StrCat(what, " status ", e.status));
    }
  }

  SimWorld& world_;
  Timeline& tl_;
  SimHost& a_;
  SimHost& b_;
  cm::ListenId accept_listen_;
  cm::PathInfo path_;
  cm::ConnId conn1_;
  mad::Gid mgid_;
  int step_ = 0;
  int leaves_ = 0;
  bool done_ = false;
  absl::Status error_;
};

}  // namespace

int RunDemo(int argc, char** argv) {
  std::string fabric = "sim";
  std::string capture = "uscm-demo.pcap";
  int64_t seed = 1;
  bool dump = false;
  std::string role;
  int64_t peer_lid = 0;
  FlagSet flags("demo [options]",
                "Runs the CM story on a fabric and prints a timeline of every MAD and event\n"
                "(virtual time on the simulated fabric): SA path query, connect with private\n"
                "data and ECE, a rejected connect, multicast join and leave, disconnect.");
  flags.String("fabric", &fabric, "sim or ibsim (with --role: umad:<ca>:<port>)");
  flags.String("role", &role,
               "server or client: one half of the story on a device fabric (what "
               "--fabric=ibsim runs on hostB / hostA; lines carry monotonic ns)");
  flags.Int("peer-lid", &peer_lid, "with --role: the other host's LID", 0, 0xBFFF);
  flags.String("capture", &capture, "pcap file to write (Wireshark / tshark -r open it)");
  flags.Int("seed", &seed, "simulation seed", 0);
  flags.Bool("dump", &dump, "print every field of every MAD under its line");
  flags.Epilog("Example: uscm demo --capture /tmp/cm.pcap && tshark -r /tmp/cm.pcap\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  if (!positional.empty()) return UsageError("demo", "unexpected argument '" + positional[0] + "'");
  auto spec = ParseFabric(fabric);
  if (!spec.ok()) return UsageError("demo", std::string(spec.status().message()));
  if (!role.empty()) {
    if (role != "server" && role != "client") {
      return UsageError("demo", "--role is server or client");
    }
    if (!spec->IsDevice()) {
      return UsageError("demo", "--role needs a device fabric (umad:<ca>:<port>)");
    }
    if (role == "client" && peer_lid == 0) {
      return UsageError("demo", "--role=client needs the server's --peer-lid");
    }
    return RunDemoRole(*spec, role == "server", static_cast<int>(peer_lid), capture);
  }
  if (spec->kind == FabricSpec::Kind::kIbsim) {
    if (dump) return UsageError("demo", "--dump is for --fabric=sim (use: uscm dump --verbose FILE)");
    return RunDemoIbsim(capture);
  }
  if (spec->kind != FabricSpec::Kind::kSim) {
    return UsageError("demo", "demo needs two hosts and an SA: --fabric=sim or --fabric=ibsim "
                              "(or --role=server|client on each of two device hosts)");
  }
  std::unique_ptr<mad::capture::PcapWriter> writer;
  if (!capture.empty()) {
    auto w = mad::capture::PcapWriter::Create(capture);
    if (!w.ok()) return Failure("demo", std::string(w.status().message()));
    writer = std::move(*w);
  }
  Timeline tl(stdout, writer.get(), dump);
  SimWorldOptions wo;
  wo.seed = static_cast<uint64_t>(seed);
  auto world = SimWorld::Create(wo, &tl);
  if (!world.ok()) return Failure("demo", std::string(world.status().message()));
  std::printf("uscm demo on the simulated fabric: %s and %s behind a switch; the SA runs on %s\n"
              "time is virtual (seed %lld); '->' lines are MADs, '*' lines are events\n\n",
              (*world)->hosts()[0]->name().c_str(), (*world)->hosts()[1]->name().c_str(),
              (*world)->sa_name().c_str(), static_cast<long long>(seed));
  DemoStory story(**world, tl);
  absl::Status s = story.Run();
  std::fflush(stdout);
  if (writer != nullptr) {
    absl::Status c = writer->Close();
    if (c.ok()) c = tl.capture_status();
    if (!c.ok()) return Failure("demo", absl::StrCat("writing ", capture, ": ", c.message()));
  }
  if (!s.ok()) return Failure("demo", std::string(s.message()));
  std::printf("\n%llu MADs, %llu events, %.3f ms of virtual time.\n",
              static_cast<unsigned long long>(tl.mads()),
              static_cast<unsigned long long>(tl.events()),
              (*world)->scheduler().Now().nanos() / 1e6);
  if (writer != nullptr) {
    std::printf("Capture: %s (%llu packets) - open it with: wireshark %s   or: uscm dump %s\n",
                capture.c_str(), static_cast<unsigned long long>(writer->packets_written()),
                capture.c_str(), capture.c_str());
  }
  return kExitOk;
}

}  // namespace uscm::tools
