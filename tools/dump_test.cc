// `uscm dump FILE` on generated captures of every supported kind, run as a
// user runs it (the binary as a subprocess).
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/test_frames.h"
#include "mad/wire/cm_samples.h"

namespace uscm::tools {
namespace {

namespace t = mad::capture::testing;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kUscm[] = "tools/uscm";  // runfiles-relative
constexpr int64_t kT0 = 1700000000LL * 1000000000;

struct Result {
  int exit_code = -1;
  std::string output;
};

Result Shell(const std::string& command) {
  Result r;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

Result Dump(const std::string& args) {
  return Shell(absl::StrCat(kUscm, " dump ", args, " 2>&1"));
}

std::vector<uint8_t> Req() {
  const auto mad = mad::wire::SampleCmMads()[0];
  return {mad.begin(), mad.end()};
}

std::string Write(const std::string& name, const t::Bytes& bytes) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  EXPECT_TRUE(t::WriteFile(path, bytes));
  return path;
}

// A tcpdump-style capture on a RoCE netdev: MADs among RC traffic and ARP.
std::vector<t::Frame> NetdevFrames() {
  const std::vector<uint8_t> data(64, 0xab);
  return {{1, kT0, t::Arp()},
          {1, kT0 + 1000, t::RoceV2(Req())},
          {1, kT0 + 2000, t::RoceV2(data, false, 0, 0x04, 0x11)},
          {1, kT0 + 3000, t::RoceV2({}, false, 0, 0x11, 0x11)},
          {1, kT0 + 4000, t::RoceV2(Req(), true, 1)},
          {1, kT0 + 5000, t::RoceV1(Req())}};
}

TEST(DumpTest, EthernetPcapngListsMadsAndCountsTheRest) {
  const std::string path = Write("netdev.pcapng", t::PcapngFile(NetdevFrames(), true));
  Result r = Dump(path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("192\\.168\\.77\\.1 -> 192\\.168\\.77\\.2 QP1 +CM REQ"));
  EXPECT_THAT(r.output, ContainsRegex("fd00::1 -> fd00::2 QP1 +CM REQ"));
  EXPECT_THAT(r.output, ContainsRegex("fe80::1 -> fe80::2 QP1 +CM REQ"));
  EXPECT_THAT(r.output, HasSubstr("3 frames without a MAD (ARP 1, RoCE v2 RC 2); --verbose "
                                  "lists them"));
  EXPECT_THAT(r.output, HasSubstr("6 packets, 0 not decodable"));
  EXPECT_THAT(r.output, Not(HasSubstr("ARP\n")));  // counted, not listed

  Result v = Dump("--verbose " + path);
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_THAT(v.output, HasSubstr("(no MAD) ARP"));
  EXPECT_THAT(v.output, HasSubstr("(no MAD) RoCE v2 RC opcode 0x04 to QP 0x000011"));
  EXPECT_THAT(v.output, HasSubstr("REQ.LocalCommID"));
  EXPECT_THAT(v.output, HasSubstr("3 frames without a MAD (ARP 1, RoCE v2 RC 2)\n"));
}

TEST(DumpTest, EthernetPcapMicroseconds) {
  Result r = Dump(Write("netdev.pcap", t::PcapFile(1, NetdevFrames(), false)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("6 packets, 0 not decodable"));
  EXPECT_THAT(r.output, ContainsRegex("1700000000\\.000001 +192\\.168\\.77\\.1 -> "));
}

TEST(DumpTest, ErfAndExportedPdu) {
  Result erf = Dump(Write("ibdump.pcap", t::PcapFile(197, {{197, kT0, t::ErfRecord(Req(), 3, 4)}},
                                                      true)));
  ASSERT_EQ(erf.exit_code, 0) << erf.output;
  EXPECT_THAT(erf.output, ContainsRegex(" 3 -> 4 +QP1 +CM REQ"));
  Result pdu = Dump(Write("ours.pcapng", t::PcapngFile({{252, kT0, t::ExportedPduRecord(
                                                                       Req(), 5, 6)}},
                                                       false)));
  ASSERT_EQ(pdu.exit_code, 0) << pdu.output;
  EXPECT_THAT(pdu.output, ContainsRegex(" 5 -> 6 +QP1 +CM REQ"));
  EXPECT_THAT(pdu.output, HasSubstr("1 packets, 0 not decodable"));
}

TEST(DumpTest, ACutMadFrameIsListedAsNotDecodable) {
  t::Bytes cut = t::RoceV2(Req());
  cut.resize(14 + 20 + 8 + 12 + 3);
  Result r = Dump(Write("cut.pcap", t::PcapFile(1, {{1, kT0, cut}}, true)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not decodable: "));
  EXPECT_THAT(r.output, HasSubstr("1 packets, 1 not decodable"));
}

TEST(DumpTest, UnsupportedLinkType) {
  Result r = Dump(Write("user0.pcap", t::PcapFile(147, {{147, kT0, t::Arp()}}, true)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("link type 147 is not supported"));
}

// One pcapng, an Ethernet interface and an InfiniBand one (libpcap 1.10
// refuses it; our pcapng reader takes it).
TEST(DumpTest, PcapngMixingLinkTypes) {
  Result r = Dump(Write("mixed.pcapng",
                        t::PcapngFile({{1, kT0, t::RoceV2(Req())},
                                       {252, kT0 + 1000, t::ExportedPduRecord(Req(), 3, 4)},
                                       {1, kT0 + 2000, t::Arp()}},
                                      true)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("192\\.168\\.77\\.1 -> 192\\.168\\.77\\.2 QP1 +CM REQ"));
  EXPECT_THAT(r.output, ContainsRegex(" 3 -> 4 +QP1 +CM REQ"));
  EXPECT_THAT(r.output, HasSubstr("1 frames without a MAD (ARP 1)"));
  EXPECT_THAT(r.output, HasSubstr("3 packets, 0 not decodable"));
}

// --live=lo: RoCE v2 datagrams sent to 127.0.0.1:4791 are captured and
// decoded. The sender repeats until the capture has seen one (set-up, not
// the assertion: the capture may start after the first datagram).
TEST(DumpTest, LiveOnLoopback) {
  if (geteuid() != 0) GTEST_SKIP() << "capturing needs root";
  const t::Bytes frame = t::RoceV2(Req());
  const t::Bytes udp_payload(frame.begin() + 14 + 20 + 8, frame.end());
  std::atomic<bool> done{false};
  std::thread sender([&] {
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(4791);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 300 && !done; ++i) {
      sendto(fd, udp_payload.data(), udp_payload.size(), 0, reinterpret_cast<sockaddr*>(&to),
             sizeof(to));
      usleep(100 * 1000);
    }
    close(fd);
  });
  Result r = Dump("--live=lo --count=1 --seconds=30");
  done = true;
  sender.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("127\\.0\\.0\\.1 -> 127\\.0\\.0\\.1 QP1 +CM REQ"));
  EXPECT_THAT(r.output, HasSubstr("1 MADs"));
}

// A real capture: the VM lane's kernel <-> kernel CM exchange on Soft-RoCE
// (tcpdump on the RoCE netdev, pcap), and the same frames as pcapng (editcap).
// For every frame tshark decodes as a CM MAD, uscm dump prints a line with
// the same frame number, message, TID, and for REQ / REJ the same Local
// Communication ID, ServiceID and reason.
TEST(DumpTest, KernelCaptureAgreesWithTshark) {
  constexpr char kFixture[] = "tests/vm/fixtures/kernel_interop_cm.pcap";
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string pcapng = dir + "/kernel.pcapng";
  Result conv = Shell(absl::StrCat("editcap -F pcapng ", kFixture, " ", pcapng, " 2>&1"));
  ASSERT_EQ(conv.exit_code, 0) << "editcap (tshark's package): " << conv.output;
  Result ts = Shell(absl::StrCat(
      "HOME=", dir, " tshark -n --disable-protocol infiniband_sdp -r ", kFixture,
      " -T fields -E separator=/t -e frame.number -e infiniband.mad.attributeid",
      " -e infiniband.mad.transactionid -e infiniband.cm.req -e infiniband.cm.req.serviceid",
      " -e infiniband.cm.rej.reason 2>/dev/null"));
  ASSERT_EQ(ts.exit_code, 0) << ts.output;
  const std::map<std::string, std::string> names = {
      {"0x0010", "REQ"}, {"0x0012", "REJ"}, {"0x0013", "REP"},
      {"0x0014", "RTU"}, {"0x0015", "DREQ"}, {"0x0016", "DREP"}};
  for (const std::string& file : {std::string(kFixture), pcapng}) {
    Result ours = Dump(file);
    ASSERT_EQ(ours.exit_code, 0) << ours.output;
    // Our lines by frame number.
    std::map<int, std::string> lines;
    for (absl::string_view line : absl::StrSplit(ours.output, '\n')) {
      std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
      int n = 0;
      // "N  time  ..." frame lines come before the "N packets" summary.
      if (!words.empty() && absl::SimpleAtoi(words[0], &n)) lines.emplace(n, std::string(line));
    }
    int checked = 0;
    for (absl::string_view row : absl::StrSplit(ts.output, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(row, '\t');
      f.resize(6);
      int n = 0;
      ASSERT_TRUE(absl::SimpleAtoi(f[0], &n)) << row;
      ASSERT_TRUE(names.count(f[1])) << row;
      const std::string& line = lines[n];
      SCOPED_TRACE(absl::StrCat(file, " frame ", n, ": ", line));
      EXPECT_THAT(line, HasSubstr(absl::StrCat("CM ", names.at(f[1]), " Send tid=", f[2])));
      if (!f[3].empty()) {
        EXPECT_THAT(line, HasSubstr("LocalCommID=" + f[3]));
        EXPECT_THAT(line, HasSubstr("ServiceID=" + f[4]));
      }
      if (!f[5].empty()) {
        EXPECT_THAT(line, HasSubstr("Reason=" + f[5]));
      }
      ++checked;
    }
    EXPECT_EQ(checked, 24);
    EXPECT_THAT(ours.output, HasSubstr("24 packets, 0 not decodable"));
  }
}

TEST(DumpTest, LiveOnAMissingNetdev) {
  Result r = Dump("--live=uscm-no-such-if0 --seconds=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("uscm-no-such-if0"));
  EXPECT_EQ(Dump("--live=").exit_code, 2);
  EXPECT_EQ(Dump("--live=lo x.pcap").exit_code, 2);
}

}  // namespace
}  // namespace uscm::tools
