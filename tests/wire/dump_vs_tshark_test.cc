// `uscm dump --verbose` against tshark on a real capture: the kernel CM's
// traffic recorded in the VM lane (tests/vm/fixtures/kernel_interop_cm.pcap,
// Ethernet / RoCE v2, 24 CM MADs), as pcap and as pcapng (editcap). The same
// comparison runs on fresh captures in tests/vm/groups/70-capture-kernel.sh.
// The mutation tests show it fails when the dump says something else.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/tshark_decode.h"
#include "tests/wire/dump_text.h"
#include "tests/wire/dump_vs_tshark.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;

constexpr char kUscm[] = "tools/uscm";  // runfiles-relative
constexpr char kFixture[] = "tests/vm/fixtures/kernel_interop_cm.pcap";

std::string Shell(const std::string& command, int* exit_code) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

std::string DumpOf(const std::string& capture) {
  int rc = -1;
  std::string out = Shell(absl::StrCat(kUscm, " dump --verbose ", capture), &rc);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

DumpVsTshark Compare(const std::string& capture, const std::string& dump_text) {
  auto dump = ParseDumpText(dump_text);
  EXPECT_TRUE(dump.ok()) << dump.status();
  auto frames = capture::DecodeCaptureWithTshark(capture);
  EXPECT_TRUE(frames.ok()) << frames.status();
  if (!dump.ok() || !frames.ok()) return {};
  return CompareDumpWithTshark(*dump, *frames);
}

// The fixture holds six kernel_interop checks: 6 REQ, 4 REP, 4 RTU, 4 DREQ,
// 4 DREP, 2 REJ (docs/VM.md "Kernel CM interop").
void ExpectFixtureAgrees(const DumpVsTshark& r) {
  EXPECT_THAT(r.disagreements, ::testing::IsEmpty()) << FormatReport(r);
  const std::map<std::string, int64_t> want = {{"CM REQ", 6},  {"CM REP", 4},  {"CM RTU", 4},
                                               {"CM DREQ", 4}, {"CM DREP", 4}, {"CM REJ", 2}};
  EXPECT_EQ(r.mads, want);
  EXPECT_EQ(r.tshark_values_equal, r.tshark_values);
  EXPECT_GT(r.fields_agreed, 500) << FormatReport(r);  // 552 with tshark 4.0.17
  std::printf("%s", FormatReport(r).c_str());
}

TEST(DumpVsTshark, KernelCaptureAgreesAsPcap) {
  ExpectFixtureAgrees(Compare(kFixture, DumpOf(kFixture)));
}

TEST(DumpVsTshark, KernelCaptureAgreesAsPcapng) {
  const std::string ng = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kernel_interop_cm.pcapng");
  int rc = -1;
  const std::string out = Shell(absl::StrCat("editcap -F pcapng ", kFixture, " ", ng, " 2>&1"), &rc);
  ASSERT_EQ(rc, 0) << "editcap (Debian wireshark-common, with tshark): " << out;
  const std::string head = Shell(absl::StrCat("head -c 4 ", ng, " | od -An -tx1"), &rc);
  ASSERT_THAT(head, HasSubstr("0a 0d 0d 0a")) << "not a pcapng Section Header Block";
  ExpectFixtureAgrees(Compare(ng, DumpOf(ng)));
}

// Each mutation of the dump's text must make the comparison fail, naming
// what differs.
std::string Mutated(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return text;
  return text.substr(0, at) + to + text.substr(at + from.size());
}

std::string Differences(const std::string& dump_text) {
  std::string out;
  for (const std::string& d : Compare(kFixture, dump_text).disagreements) {
    absl::StrAppend(&out, d, "\n");
  }
  return out;
}

TEST(DumpVsTshark, AFieldTsharkDecodesThatDiffersFails) {
  const std::string dump = DumpOf(kFixture);
  EXPECT_THAT(Differences(Mutated(dump, "REQ.StartingPSN                    0x752d6e",
                                  "REQ.StartingPSN                    0x752d6f")),
              HasSubstr("frame 1 CM REQ: tshark infiniband.cm.req.startpsn (MAD bits 544..568) "
                        "= 0x752d6e, uscm dump printed REQ.StartingPSN 0x752d6f"));
  EXPECT_THAT(Differences(Mutated(dump, "REP.TargetACKDelay                 0x0f",
                                  "REP.TargetACKDelay                 0x0e")),
              HasSubstr("infiniband.cm.rep.tgtackdelay"));
}

TEST(DumpVsTshark, AFieldTsharkMisdecodesIsStillComparedAsBytes) {
  // tshark 4.0 misreads the REQ flow label (wire notes Q3): infiniband.mad.data catches it.
  EXPECT_THAT(Differences(Mutated(DumpOf(kFixture), "REQ.PrimaryFlowLabel               0x00000",
                                  "REQ.PrimaryFlowLabel               0x00001")),
              HasSubstr("tshark infiniband.mad.data (MAD bytes 24..255) first at MAD byte 114: "
                        "tshark 0x00, the dump 0x10 (REQ.PrimaryFlowLabel 0x00001)"));
}

TEST(DumpVsTshark, AddressesAndFramesMustMatch) {
  const std::string dump = DumpOf(kFixture);
  EXPECT_THAT(Differences(
                  Mutated(dump, "192.168.78.2 -> 192.168.78.1", "192.168.78.3 -> 192.168.78.1")),
              HasSubstr("frame 1: uscm dump says 192.168.78.3 -> 192.168.78.1, tshark "
                        "192.168.78.2 -> 192.168.78.1"));
  // The MAD of frame 1 printed as frame 2's: tshark decodes a REQ in frame 1 the dump lacks.
  const std::string shifted = Mutated(dump, "    1 1795324111", "    2 1795324111");
  EXPECT_THAT(Differences(shifted),
              HasSubstr("frame 1: tshark decodes a MAD (class 0x07, attribute 0x0010); uscm "
                        "dump printed none"));
}

TEST(DumpVsTshark, NoMadIsNoComparison) {
  const DumpVsTshark r = Compare(kFixture, "    #       time (s)  SRC -> DST     QP    MAD\n");
  EXPECT_EQ(r.total_mads(), 0);
  EXPECT_EQ(r.disagreements.size(), 24u);  // every MAD tshark decodes is missing from the dump
}

TEST(DumpText, ReadsBackEveryFieldLine) {
  auto dump = ParseDumpText(DumpOf(kFixture));
  ASSERT_TRUE(dump.ok()) << dump.status();
  ASSERT_EQ(dump->mads.size(), 24u);
  const DumpedMad& req = dump->mads[0];
  EXPECT_EQ(req.frame, 1);
  EXPECT_EQ(req.src, "192.168.78.2");
  EXPECT_EQ(req.dst, "192.168.78.1");
  EXPECT_EQ(req.dest_qp, 1u);
  EXPECT_EQ(req.mad[1], 0x07);                          // MgmtClass
  EXPECT_EQ(req.mad[68] << 16 | req.mad[69] << 8 | req.mad[70], 0x752d6e);  // StartingPSN
  EXPECT_EQ(req.mad[164 + 1], 0x40);                    // private data: CMA header
}

TEST(DumpText, RejectsWhatThePrinterDoesNotWrite) {
  const std::string dump = DumpOf(kFixture);
  auto moved = ParseDumpText(Mutated(dump, "  MAD+68     REQ.StartingPSN", "  MAD+69     REQ.StartingPSN"));
  EXPECT_THAT(moved.status().message(), HasSubstr("the tables have this row at another position"));
  auto unknown = ParseDumpText(Mutated(dump, "REQ.StartingPSN   ", "REQ.StartPSN      "));
  EXPECT_THAT(unknown.status().message(), HasSubstr("no row of this MAD's tables has this name"));
  auto wide = ParseDumpText(Mutated(dump, "REQ.StartingPSN                    0x752d6e",
                                    "REQ.StartingPSN                    0x1752d6e"));
  EXPECT_THAT(wide.status().message(), HasSubstr("is not a 24-bit value"));
  int rc = -1;
  auto terse = ParseDumpText(Shell(absl::StrCat(kUscm, " dump ", kFixture), &rc));
  EXPECT_THAT(terse.status().message(), HasSubstr("is it uscm dump --verbose?"));
}

}  // namespace
}  // namespace uscm::mad::wire
