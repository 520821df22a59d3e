// dump_vs_tshark CAPTURE DUMP [--require=REQ,REP,...]
//
// Compares DUMP, the output of `uscm dump --verbose CAPTURE`, with tshark's
// decode of CAPTURE (tests/wire/dump_vs_tshark.h) and prints the report.
// Exit 0 when every MAD agrees field for field, at least one MAD was compared
// and every --require'd CM message ("REQ" means "CM REQ") was among them;
// 1 otherwise; 2 on a usage error.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mad/capture/tshark_decode.h"
#include "tests/wire/dump_text.h"
#include "tests/wire/dump_vs_tshark.h"

int main(int argc, char** argv) {
  using namespace uscm::mad;
  std::vector<std::string> files, required;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--require=")) {
      for (absl::string_view m : absl::StrSplit(a.substr(10), ',', absl::SkipEmpty())) {
        required.push_back(absl::StrCat("CM ", m));
      }
    } else if (absl::StartsWith(a, "-")) {
      std::fprintf(stderr, "dump_vs_tshark: unknown option %s\n", a.c_str());
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.size() != 2) {
    std::fprintf(stderr, "usage: dump_vs_tshark CAPTURE DUMP [--require=REQ,REP,...]\n");
    return 2;
  }
  std::ifstream in(files[1]);
  if (!in) {
    std::fprintf(stderr, "dump_vs_tshark: cannot read %s\n", files[1].c_str());
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto dump = wire::ParseDumpText(text.str());
  if (!dump.ok()) {
    std::fprintf(stderr, "dump_vs_tshark: %s: %s\n", files[1].c_str(),
                 std::string(dump.status().message()).c_str());
    return 1;
  }
  auto frames = capture::DecodeCaptureWithTshark(files[0]);
  if (!frames.ok()) {
    std::fprintf(stderr, "dump_vs_tshark: %s\n", std::string(frames.status().message()).c_str());
    return 1;
  }
  const wire::DumpVsTshark r = wire::CompareDumpWithTshark(*dump, *frames);
  std::fputs(wire::FormatReport(r).c_str(), stdout);
  int rc = r.disagreements.empty() ? 0 : 1;
  if (r.total_mads() == 0) {
    std::printf("FAILED: no MAD compared (uscm dump printed none that tshark decodes)\n");
    rc = 1;
  }
  for (const std::string& m : required) {
    if (!r.mads.contains(m)) {
      std::printf("FAILED: no %s among the MADs compared\n", m.c_str());
      rc = 1;
    }
  }
  return rc;
}
