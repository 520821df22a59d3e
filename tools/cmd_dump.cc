// `uscm dump`: decodes a capture file (ours, or ibdump's ERF) MAD by MAD with
// the wire printer, or captures live from a device transport.
#include <poll.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/pcap_writer.h"
#include "mad/time.h"
#include "mad/wire/printer.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/fabric_flags.h"

namespace uscm::tools {
namespace {

void PrintPacket(uint64_t n, mad::TimePoint t, const mad::capture::ParsedUdPacket& p,
                 bool verbose) {
  absl::PrintF("%5d %14.6f  %5d -> %-5d QP%-3d %s%s\n", n, t.nanos() / 1e9, p.headers.slid,
               p.headers.dlid, p.headers.dest_qpn, mad::wire::Summary(p.mad),
               p.icrc_ok ? "" : "  [bad ICRC]");
  if (verbose) std::fputs(mad::wire::Dump(p.mad).c_str(), stdout);
}

int DumpFile(const std::string& path, bool verbose) {
  auto contents = mad::capture::ReadPcapFile(path);
  if (!contents.ok()) {
    return Failure("dump", absl::StrCat("cannot read ", path, ": ", contents.status().message()));
  }
  absl::PrintF("%5s %14s  %-14s %-5s %s\n", "#", "time (s)", "SLID -> DLID", "QP", "MAD");
  uint64_t n = 0, bad = 0;
  for (const auto& rec : contents->records) {
    ++n;
    auto p = mad::capture::ParseUdPacket(rec.packet);
    if (!p.ok()) {
      ++bad;
      absl::PrintF("%5d %14.6f  not a UD MAD packet: %s\n", n, rec.time.nanos() / 1e9,
                   p.status().message());
      continue;
    }
    PrintPacket(n, rec.time, *p, verbose);
  }
  absl::PrintF("%d packets, %d not decodable\n", n, bad);
  return kExitOk;
}

int DumpLive(const FabricSpec& spec, int64_t count, int64_t seconds, const std::string& write) {
  if (spec.kind == FabricSpec::Kind::kSim || spec.kind == FabricSpec::Kind::kIbsim) {
    return UsageError("dump", "--live needs a device fabric (umad:<ca>:<port> or "
                              "ud:<device>:<port>); the simulated fabric is captured with "
                              "'uscm demo --capture FILE'");
  }
  auto t = OpenRealTransport(spec);
  if (!t.ok()) return Failure("dump", std::string(t.status().message()));
  std::unique_ptr<mad::capture::PcapWriter> writer;
  if (!write.empty()) {
    auto w = mad::capture::PcapWriter::Create(write);
    if (!w.ok()) return Failure("dump", std::string(w.status().message()));
    writer = std::move(*w);
  }
  mad::RealClock clock;
  const mad::TimePoint end = clock.Now() + mad::Duration::Seconds(seconds);
  uint64_t n = 0;
  absl::PrintF("listening on %s (%s, LID %d); Ctrl-C to stop\n", spec.ToString(),
               (*t)->port().ca_name, (*t)->port().lid);
  std::fflush(stdout);  // whoever watches the output knows we listen
  while ((count == 0 || static_cast<int64_t>(n) < count) && (seconds == 0 || clock.Now() < end)) {
    pollfd pfd{(*t)->fd(), POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    (*t)->Drain([&](const mad::ReceivedMad& m) {
      auto headers = mad::capture::IncomingHeaders((*t)->port(), m.from);
      auto packet = mad::capture::WrapMad(headers, m.data);
      if (!packet.ok()) return;
      auto parsed = mad::capture::ParseUdPacket(*packet);
      if (parsed.ok()) PrintPacket(++n, clock.Now(), *parsed, false);
      std::fflush(stdout);
      if (writer != nullptr) (void)writer->WritePacket(clock.Now(), *packet);
    });
  }
  absl::PrintF("%d MADs\n", n);
  if (writer != nullptr) {
    if (absl::Status c = writer->Close(); !c.ok()) return Failure("dump", std::string(c.message()));
  }
  return kExitOk;
}

}  // namespace

int RunDump(int argc, char** argv) {
  bool verbose = false;
  bool live = false;
  std::string fabric = "sim";
  std::string write;
  int64_t count = 0;
  int64_t seconds = 0;
  FlagSet flags("dump [options] FILE | dump --live --fabric=F [options]",
                "Decodes a pcap capture of InfiniBand MADs (uscm's own, or ibdump's ERF), one\n"
                "line per MAD, or with --live prints MADs as a device transport receives them.");
  flags.Bool("verbose", &verbose, "print every field of every MAD (-v style)");
  flags.Bool("live", &live, "capture live instead of reading a file");
  flags.String("fabric", &fabric, "with --live: umad:<ca>:<port>, ud:<device>:<port> or router:<socket>");
  flags.String("write", &write, "with --live: also write the MADs to this pcap file");
  flags.Int("count", &count, "with --live: stop after N MADs (0 = no limit)", 0);
  flags.Int("seconds", &seconds, "with --live: stop after N seconds (0 = no limit)", 0);
  flags.Epilog("Example: uscm demo && uscm dump --verbose uscm-demo.pcap\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  if (live) {
    if (!positional.empty()) return UsageError("dump", "--live takes no FILE");
    auto spec = ParseFabric(fabric);
    if (!spec.ok()) return UsageError("dump", std::string(spec.status().message()));
    return DumpLive(*spec, count, seconds, write);
  }
  if (positional.size() != 1) return UsageError("dump", "expected one capture FILE (or --live)");
  return DumpFile(positional[0], verbose);
}

}  // namespace uscm::tools
