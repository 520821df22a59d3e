#include "tools/ping_device.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/gid.h"
#include "mad/wire/cm_rej.h"
#include "tools/cli.h"
#include "tools/real_host.h"
#include "tools/sim_world.h"
#include "tools/workload.h"
#include "verbs/roce_addressing.h"
#include "verbs/ud_transport.h"

namespace uscm::tools {
namespace {

constexpr uint32_t kEceVendor = 0x15B3;
constexpr uint32_t kEceOptions = 0x1;

std::vector<uint8_t> Bytes(absl::string_view s) { return {s.begin(), s.end()}; }

// What a RoCE port adds (docs/VM.md "How uscm builds the path on RoCE"): the
// RoceAddressing middleware around the transport (source GID index; QP1
// redirected to the peer's UD QP on ud:) and the port's GID table.
struct Roce {
  verbs::RoceAddressing* addressing = nullptr;  // null: not RoCE
  std::vector<mad::Gid> gids;
  uint32_t ud_qpn = 0;  // ud: this process's UD QP

  // The port's first IPv4-mapped GID (RoCE v2).
  absl::optional<mad::Gid> Ipv4Gid() const {
    for (const mad::Gid& g : gids) {
      if (verbs::IsIpv4Mapped(g)) return g;
    }
    return absl::nullopt;
  }
};

uint32_t Ipv4Of(const mad::Gid& g) {
  return uint32_t{g.raw[12]} << 24 | uint32_t{g.raw[13]} << 16 | uint32_t{g.raw[14]} << 8 |
         g.raw[15];
}

int RunServer(RealHost& host, const PingConfig& c, const Roce& roce) {
  auto listen = host.cm().Listen(c.service_id, ~0ULL, 64, false);
  if (!listen.ok()) return Failure("ping", std::string(listen.status().message()));
  int ended = 0, established = 0, rejected = 0;
  uint32_t next_qpn = 0x200000;
  absl::Status error;
  host.on_cm_event = [&](mad::TimePoint now, const cm::CmEvent& e) {
    switch (e.type) {
      case cm::CmEventType::kConnectRequest: {
        if (c.verbose) {
          absl::PrintF("  REQ: private data %s\n", Printable(e.private_data.bytes()));
        }
        if (c.reject) {
          if (auto s = host.cm().Reject(now, e.conn, mad::wire::RejReason::kConsumerReject,
                                        Bytes("uscm ping: rejected as asked"));
              !s.ok()) {
            error = s;
          }
          (void)host.cm().Destroy(now, e.conn);
          ++rejected;
          ++ended;
          return;
        }
        cm::AcceptParams ap;
        ap.qpn = next_qpn++ & 0xFFFFFF;
        ap.starting_psn = 0x2000;
        ap.responder_resources = 4;
        ap.initiator_depth = 4;
        if (c.ece && e.remote_ece.vendor_id != 0) ap.ece_options = e.remote_ece.options;
        ap.private_data = Bytes("uscm pong");
        if (auto s = host.cm().Accept(now, e.conn, ap); !s.ok()) error = s;
        return;
      }
      case cm::CmEventType::kEstablished:
        ++established;
        if (!c.disconnect) ++ended;
        return;
      case cm::CmEventType::kDisconnected:
        (void)host.cm().Disconnect(now, e.conn);  // DREP (a no-op after our own DREQ)
        (void)host.cm().Destroy(now, e.conn);
        ++ended;
        return;
      case cm::CmEventType::kTimewaitExit:
        return;
      default:
        (void)host.cm().Destroy(now, e.conn);
        ++ended;
        return;
    }
  };
  std::string extra;
  if (roce.addressing != nullptr) {
    auto v4 = roce.Ipv4Gid();
    absl::StrAppend(&extra, " RoCE GID ", v4 ? v4->ToString() : "(no IPv4 address)");
  }
  if (roce.ud_qpn != 0) absl::StrAppend(&extra, " UD QPN ", roce.ud_qpn);
  absl::PrintF("uscm ping: server listening on %s:%d LID %d GID %s%s service 0x%016x\n",
               host.port().ca_name, host.port().port_num, host.port().lid,
               host.port().gid.ToString(), extra, c.service_id);
  std::fflush(stdout);
  const mad::Duration limit =
      c.seconds > 0 ? mad::Duration::Seconds(c.seconds) : mad::Duration::Seconds(365 * 86400);
  absl::Status s = host.RunUntil([&] { return !error.ok() || ended >= c.connections; }, limit,
                                 "server");
  // Let the last DREP / REJ leave before the process exits.
  host.node().Process();
  absl::PrintF("server: %d established, %d rejected, %d ended\n", established, rejected, ended);
  if (!error.ok()) return Failure("ping", std::string(error.message()));
  if (!s.ok() && c.seconds == 0) return Failure("ping", std::string(s.message()));
  return kExitOk;
}

// RoCE has no SA: the path comes from the two IPv4-mapped GIDs.
absl::StatusOr<cm::PathInfo> RocePath(const PingConfig& c, const Roce& roce) {
  if (c.dgid.empty()) {
    return absl::InvalidArgumentError(
        "on a RoCE port (no SA, no LIDs) the client needs the server's IPv4-mapped "
        "--dgid=::ffff:A.B.C.D (the server's listen line prints its RoCE GID)");
  }
  auto dgid = mad::Gid::Parse(c.dgid);
  if (!dgid.ok()) return dgid.status();
  if (!verbs::IsIpv4Mapped(*dgid)) {
    return absl::InvalidArgumentError(absl::StrCat("--dgid=", c.dgid, " is not IPv4-mapped "
                                                   "(::ffff:A.B.C.D), which RoCE v2 needs"));
  }
  auto own = roce.Ipv4Gid();
  if (!own) {
    return absl::FailedPreconditionError(
        "the port's GID table has no IPv4-mapped GID: give its netdev an IPv4 address");
  }
  if (roce.ud_qpn != 0) {
    if (c.peer_ud_qpn == 0) {
      return absl::InvalidArgumentError(
          "ud: on a RoCE port QP1 belongs to the kernel: the client needs the server's "
          "--peer-ud-qpn=N (the server's listen line prints its UD QPN)");
    }
    roce.addressing->RedirectQp1(*dgid, c.peer_ud_qpn, kRoceUdQkey);
  }
  return verbs::RocePathFromIps(Ipv4Of(*own), Ipv4Of(*dgid));
}

absl::StatusOr<cm::PathInfo> QueryPath(RealHost& host, const PingConfig& c, const Roce& roce) {
  if (roce.addressing != nullptr) return RocePath(c, roce);
  sa::PathQuery q;
  if (!c.dgid.empty()) {
    auto dgid = mad::Gid::Parse(c.dgid);
    if (!dgid.ok()) return dgid.status();
    q = sa::PathQuery::RdmaCm(host.port().gid, *dgid, 0xFFFF, c.service_id);
  } else {
    q.Slid(host.port().lid).Dlid(static_cast<uint16_t>(c.dlid));
  }
  absl::optional<sa::SaResult> result;
  host.on_sa_result = [&](mad::TimePoint, sa::SaResult r) { result = std::move(r); };
  auto id = host.sa().GetPath(host.Now(), q);
  if (!id.ok()) return id.status();
  host.Kick();
  absl::Status s = host.RunUntil([&] { return result.has_value(); },
                                 mad::Duration::Millis(c.timeout_ms), "SA PathRecord query");
  if (!s.ok()) return s;
  if (!result->status.ok()) return result->status;
  if (result->paths.empty()) return absl::NotFoundError("the SA returned no path");
  return PathFromRecord(result->paths[0]);
}

int RunClient(RealHost& host, const PingConfig& c, const Roce& roce) {
  auto path = QueryPath(host, c, roce);
  if (!path.ok()) {
    return Failure("ping", absl::StrCat("path to the server: ", path.status().message()));
  }
  absl::PrintF("uscm ping: %s:%d LID %d -> LID %d, %d connection%s%s%s\n", host.port().ca_name,
               host.port().port_num, path->local_lid, path->remote_lid, c.connections,
               c.connections == 1 ? "" : "s", c.reject ? ", server rejects" : "",
               c.ece ? ", ECE" : "");
  // Up to `window` connections in flight (cmtime starts them all at once);
  // each is REQ -> REP -> RTU (or REJ), then DREQ -> DREP with --disconnect.
  struct Flight {
    int index = 0;
    cm::ConnId conn;
    mad::TimePoint t0;
    bool disconnecting = false;
  };
  std::vector<Flight> flights;
  std::vector<double> times;
  int ok = 0, failed = 0, ended = 0;
  std::string why;  // the last failure
  const auto find = [&](cm::ConnId id) {
    return std::find_if(flights.begin(), flights.end(),
                        [&](const Flight& f) { return f.conn == id; });
  };
  // Counts a connection's outcome when its setup ends (ESTABLISHED, REJ, error).
  const auto outcome = [&](const Flight& f, mad::TimePoint now, bool good,
                           const std::string& what) {
    const double us = (now - f.t0).micros();
    if (c.verbose) {
      absl::PrintF("  #%-5d %-12s %10.1f us%s\n", f.index,
                   good ? (c.reject ? "rejected" : "established") : "failed", us,
                   what.empty() ? "" : "  " + what);
    }
    if (good) {
      ++ok;
      times.push_back(us);
    } else {
      ++failed;
      why = what;
    }
  };
  const auto finish = [&](std::vector<Flight>::iterator it) {
    flights.erase(it);
    ++ended;
  };
  host.on_cm_event = [&](mad::TimePoint now, const cm::CmEvent& e) {
    auto it = find(e.conn);
    switch (e.type) {
      case cm::CmEventType::kConnectResponse:
        if (auto s = host.cm().Rtu(now, e.conn); !s.ok() && it != flights.end()) {
          outcome(*it, now, false, std::string(s.message()));
          (void)host.cm().Destroy(now, e.conn);
          finish(it);
        }
        return;
      case cm::CmEventType::kEstablished:
        if (it == flights.end()) return;
        outcome(*it, now, !c.reject,
                c.reject ? "established although the server should reject" : "");
        if (!c.reject && c.disconnect) {
          if (auto d = host.cm().Disconnect(now, e.conn, Bytes("bye")); d.ok()) {
            it->disconnecting = true;
            return;
          }
        }
        finish(it);
        return;
      case cm::CmEventType::kRejected:
        (void)host.cm().Destroy(now, e.conn);
        if (it == flights.end()) return;
        outcome(*it, now, c.reject, c.reject ? "" : absl::StrCat("rejected, reason ", e.status));
        finish(it);
        return;
      case cm::CmEventType::kDisconnected:
        (void)host.cm().Destroy(now, e.conn);
        if (it != flights.end() && it->disconnecting) finish(it);
        return;
      case cm::CmEventType::kTimewaitExit:
      case cm::CmEventType::kMraReceived:
        return;
      default:
        (void)host.cm().Destroy(now, e.conn);
        if (it == flights.end()) return;
        if (!it->disconnecting) {
          outcome(*it, now, false,
                  absl::StrCat("CM event ", cm::CmEventTypeName(e.type), " status ", e.status));
        }
        finish(it);
        return;
    }
  };
  const mad::TimePoint start = host.Now();
  const mad::Duration wait = mad::Duration::Millis(c.timeout_ms);
  const int window = std::max(1, c.window);
  int next = 0;
  while (ended < c.connections) {
    while (static_cast<int>(flights.size()) < window && next < c.connections) {
      cm::ConnectParams p;
      p.service_id = c.service_id;
      p.primary = *path;
      p.qpn = static_cast<uint32_t>(0x100000 + next) & 0xFFFFFF;
      p.starting_psn = 0x1000;
      p.responder_resources = 4;
      p.initiator_depth = 4;
      p.private_data = Bytes(c.private_data);
      if (c.ece) p.ece = cm::Ece{kEceVendor, kEceOptions};
      Flight f;
      f.index = next++;
      f.t0 = host.Now();
      auto id = host.cm().Connect(f.t0, p);
      if (!id.ok()) return Failure("ping", std::string(id.status().message()));
      f.conn = *id;
      flights.push_back(f);
    }
    host.Kick();
    const int before = ended;
    absl::Status s = host.RunUntil([&] { return ended > before; }, wait,
                                   absl::StrCat("connection ", flights.front().index));
    if (!s.ok()) {
      // Nothing ended within --timeout-ms: the server is gone; do not wait
      // again for every connection left.
      for (const Flight& f : flights) {
        if (f.disconnecting) {
          return Failure("ping", absl::StrCat("disconnect ", f.index, ": ", s.message()));
        }
        outcome(f, host.Now(), false, std::string(s.message()));
      }
      break;
    }
  }
  const double secs = (host.Now() - start).seconds();
  std::sort(times.begin(), times.end());
  absl::PrintF("%d %s, %d failed\n", ok, c.reject ? "rejected as asked" : "established", failed);
  if (!times.empty()) {
    absl::PrintF("setup time (us, wall clock): min %.1f  p50 %.1f  p99 %.1f  max %.1f\n",
                 times.front(), Percentile(times, 0.5), Percentile(times, 0.99), times.back());
  }
  absl::PrintF("%.0f connections/s (%d in %.3f ms, %s)\n", secs > 0 ? ok / secs : 0.0, ok,
               secs * 1e3,
               absl::StrCat(c.reject       ? "REQ + REJ"
                            : c.disconnect ? "connect + disconnect"
                                           : "connect only",
                            c.window <= 1 ? ", one at a time"
                                          : absl::StrCat(", up to ", c.window, " in flight")));
  if (failed != 0 && !why.empty()) return Failure("ping", why);
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunPingDevice(const FabricSpec& spec, const PingConfig& config) {
  Roce roce;
  absl::Status wrap_error;
  RealHost::Wrap wrap;
  if (spec.kind == FabricSpec::Kind::kUmad || spec.kind == FabricSpec::Kind::kUd) {
    wrap = [&](mad::Transport& inner) -> std::unique_ptr<mad::Transport> {
      if (auto* ud = dynamic_cast<verbs::UdTransport*>(&inner)) roce.ud_qpn = ud->qpn();
      if (inner.port().link_layer != mad::LinkLayer::kEthernet) {
        roce.ud_qpn = 0;  // InfiniBand: QP1 is reachable, nothing to redirect
        return nullptr;
      }
      auto gids = verbs::ReadGidTable(spec.device, spec.port);
      if (!gids.ok()) {
        wrap_error = gids.status();
        return nullptr;
      }
      roce.gids = std::move(*gids);
      auto r = std::make_unique<verbs::RoceAddressing>(inner, roce.gids);
      roce.addressing = r.get();
      return r;
    };
  }
  auto host = RealHost::Open(spec, RealTransportOptions{}, wrap);
  if (!host.ok()) return Failure("ping", std::string(host.status().message()));
  if (!wrap_error.ok()) return Failure("ping", std::string(wrap_error.message()));
  return config.server ? RunServer(**host, config, roce) : RunClient(**host, config, roce);
}

}  // namespace uscm::tools
