// `uscm dump`: decodes a capture file MAD by MAD with the wire printer: pcap
// or pcapng read by libpcap, link types Ethernet (RoCE v2 / v1), Linux cooked,
// ERF (ibdump) and ours (tools/pcap_source.h, mad/capture/frame_decode.h); or
// captures live, from a netdev with libpcap (--live=NETDEV) or from a device
// transport (--live --fabric=...).
#include <poll.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/capture/frame_decode.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_writer.h"
#include "mad/time.h"
#include "mad/wire/printer.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/fabric_flags.h"
#include "tools/pcap_source.h"

namespace uscm::tools {
namespace {

void PrintPacket(uint64_t n, mad::TimePoint t, const mad::capture::ParsedUdPacket& p,
                 bool verbose) {
  absl::PrintF("%5d %14.6f  %5d -> %-5d QP%-3d %s%s\n", n, t.nanos() / 1e9, p.headers.slid,
               p.headers.dlid, p.headers.dest_qpn, mad::wire::Summary(p.mad),
               p.icrc_ok ? "" : "  [bad ICRC]");
  if (verbose) std::fputs(mad::wire::Dump(p.mad).c_str(), stdout);
}

// Decodes and prints the frames of a libpcap source: MADs one line each,
// frames that carry no MAD counted by kind (listed with --verbose), frames
// that should carry a MAD but do not parse listed always.
class FramePrinter {
 public:
  explicit FramePrinter(bool verbose) : verbose_(verbose) {}

  void Header() const {
    absl::PrintF("%5s %14s  %-14s %-5s %s\n", "#", "time (s)", "SRC -> DST", "QP", "MAD");
  }

  void Print(const PcapSource::Packet& pk) {
    ++n_;
    const double t = pk.time.nanos() / 1e9;
    auto d = mad::capture::DecodeFrame(pk.link_type, pk.data);
    if (!d.ok()) {
      ++bad_;
      absl::PrintF("%5d %14.6f  not decodable: %s\n", n_, t, d.status().message());
      return;
    }
    if (!d->is_mad) {
      ++other_[d->kind];
      if (verbose_) absl::PrintF("%5d %14.6f  (no MAD) %s\n", n_, t, d->detail);
      return;
    }
    ++mads_;
    absl::PrintF("%5d %14.6f  %5s -> %-5s QP%-3d %s%s\n", n_, t, d->src, d->dst, d->dest_qp,
                 mad::wire::Summary(d->mad),
                 d->icrc_ok.has_value() && !*d->icrc_ok ? "  [bad ICRC]" : "");
    if (verbose_) std::fputs(mad::wire::Dump(d->mad).c_str(), stdout);
  }

  // "N frames without a MAD (RoCE v2 RC 40, ARP 2); --verbose lists them",
  // then "N packets, B not decodable" (N counts every frame).
  void Summary() const {
    if (!other_.empty()) {
      uint64_t total = 0;
      std::string kinds;
      for (const auto& [kind, count] : other_) {
        total += count;
        absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", kind, " ", count);
      }
      absl::PrintF("%d frames without a MAD (%s)%s\n", total, kinds,
                   verbose_ ? "" : "; --verbose lists them");
    }
    absl::PrintF("%d packets, %d not decodable\n", n_, bad_);
  }
  uint64_t mads() const { return mads_; }

 private:
  bool verbose_;
  uint64_t n_ = 0, mads_ = 0, bad_ = 0;
  std::map<std::string, uint64_t> other_;
};

int DumpFile(const std::string& path, bool verbose) {
  auto source = PcapSource::OpenFile(path);
  if (!source.ok()) {
    return Failure("dump", absl::StrCat("cannot read ", path, ": ", source.status().message()));
  }
  for (uint32_t link : (*source)->link_types()) {
    if (!mad::capture::IsSupportedLinkType(link)) {
      return Failure("dump", absl::StrCat(path, ": link type ", link,
                                          " is not supported (1 Ethernet, 113 Linux cooked, "
                                          "197 ERF, 252 exported PDU)"));
    }
  }
  FramePrinter printer(verbose);
  printer.Header();
  for (;;) {
    auto pk = (*source)->Next();
    if (!pk.ok()) {
      printer.Summary();
      return Failure("dump", absl::StrCat(path, ": ", pk.status().message()));
    }
    if (!pk->has_value()) break;
    printer.Print(**pk);
  }
  printer.Summary();
  return kExitOk;
}

// --live=NETDEV: libpcap on a RoCE netdev (Soft-RoCE, or a NIC whose RDMA
// traffic reaches the kernel's capture path).
int DumpNetdev(const std::string& netdev, bool verbose, int64_t count, int64_t seconds) {
  auto source = PcapSource::OpenLive(netdev);
  if (!source.ok()) return Failure("dump", std::string(source.status().message()));
  mad::RealClock clock;
  const mad::TimePoint end = clock.Now() + mad::Duration::Seconds(seconds);
  absl::PrintF("capturing on %s (link type %d, filter \"%s\"); Ctrl-C to stop\n", netdev,
               *(*source)->link_types().begin(), kRoceFilter);
  FramePrinter printer(verbose);
  printer.Header();
  std::fflush(stdout);
  while ((count == 0 || static_cast<int64_t>(printer.mads()) < count) &&
         (seconds == 0 || clock.Now() < end)) {
    auto pk = (*source)->Next();
    if (!pk.ok()) return Failure("dump", absl::StrCat(netdev, ": ", pk.status().message()));
    if (!pk->has_value()) continue;
    printer.Print(**pk);
    std::fflush(stdout);
  }
  printer.Summary();
  absl::PrintF("%d MADs\n", printer.mads());
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
  std::string netdev;
  std::string fabric = "sim";
  std::string write;
  int64_t count = 0;
  int64_t seconds = 0;
  FlagSet flags("dump [options] FILE | dump --live=NETDEV | dump --live --fabric=F [options]",
                "Decodes a capture, one line per MAD: pcap or pcapng (read with libpcap) of\n"
                "Ethernet frames (RoCE v2 over IPv4/IPv6, VLAN tags, RoCE v1), Linux cooked\n"
                "captures, ERF (ibdump) or uscm's own; frames without a MAD are counted.\n"
                "--live=NETDEV captures RoCE traffic (UDP 4791, EtherType 0x8915) on a netdev\n"
                "with libpcap; --live --fabric=F prints MADs as a device transport receives them.");
  flags.Bool("verbose", &verbose,
             "print every field of every MAD (-v style) and list frames without a MAD");
  flags.Bool("live", &live, "capture live instead of reading a file (--live=NETDEV: libpcap)");
  flags.String("fabric", &fabric, "with --live: umad:<ca>:<port>, ud:<device>:<port> or router:<socket>");
  flags.String("write", &write, "with --live: also write the MADs to this pcap file");
  flags.Int("count", &count, "with --live: stop after N MADs (0 = no limit)", 0);
  flags.Int("seconds", &seconds, "with --live: stop after N seconds (0 = no limit)", 0);
  flags.Epilog("Example: uscm demo && uscm dump --verbose uscm-demo.pcap\n");
  // --live=NETDEV: the netdev for libpcap (--live alone is the boolean flag).
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a.rfind("--live=", 0) == 0 && a != "--live=true" && a != "--live=false") {
      netdev = a.substr(7);
      if (netdev.empty()) return UsageError("dump", "--live= needs a netdev (--live=eth0)");
      a = "--live";
    }
  }
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(static_cast<int>(cargs.size()), cargs.data(), &positional)) {
    return *rc;
  }
  if (live && !netdev.empty()) {
    if (!positional.empty()) return UsageError("dump", "--live takes no FILE");
    if (!write.empty()) {
      return UsageError("dump", "--write is for --live --fabric; record a netdev with "
                                "tcpdump -w or dumpcap");
    }
    return DumpNetdev(netdev, verbose, count, seconds);
  }
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
