#include "tests/wire/dump_text.h"

#include <cstring>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "mad/gid.h"
#include "mad/wire/field.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/printer.h"

namespace uscm::mad::wire {
namespace {

// "    1 1795324111.006895  192.168.78.2 -> 192.168.78.1 QP1   CM REQ Send ..."
const std::regex& MadLine() {
  static const auto* const re =
      new std::regex(R"(^ *(\d+) +[0-9.]+  +(\S+) +-> +(\S+) +QP(\d+) +(.*)$)");
  return *re;
}
// "    7 1795324111.9  not decodable: why"
const std::regex& BadLine() {
  static const auto* const re = new std::regex(R"(^ *(\d+) +[0-9.]+  +not decodable: .*$)");
  return *re;
}
// "  MAD+67[5]  REQ.TransportServiceType           0x0"
const std::regex& FieldLine() {
  static const auto* const re =
      new std::regex(R"(^  MAD\+(\d+)(?:\[(\d)\])? +([A-Za-z]+)\.(\S+) +(.*)$)");
  return *re;
}

absl::Status LineError(size_t line_no, absl::string_view line, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("uscm dump output line ", line_no, " (\"", line, "\"): ", why));
}

// Writes the printed value of `row` (of a table at MAD byte `offset`) into `mad`.
absl::Status Place(const Field& row, size_t offset, absl::string_view value,
                   std::array<uint8_t, 256>& mad) {
  uint8_t* table = mad.data() + offset;
  if (row.width <= 64) {
    uint64_t v = 0;
    const bool ok = row.width == 1
                        ? (value == "0" || value == "1") && absl::SimpleAtoi(value, &v)
                        : absl::ConsumePrefix(&value, "0x") &&
                              value.size() == (row.width + 3u) / 4 &&
                              absl::SimpleHexAtoi(value, &v);
    if (!ok || v > row.max_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", value, "' is not a ", row.width, "-bit value as the printer writes it"));
    }
    WriteField(table, row, v);
    return absl::OkStatus();
  }
  const size_t n = row.width / 8u;
  if (n == 16 && std::strstr(row.name, "GID") != nullptr) {
    absl::StatusOr<Gid> gid = Gid::Parse(value);
    if (!gid.ok()) return gid.status();
    std::memcpy(table + row.byte, gid->raw.data(), 16);
    return absl::OkStatus();
  }
  // "00409c40 (+56 zero bytes)", "(+196 zero bytes)" or all hex.
  std::string hex(value);
  size_t zeros = 0;
  if (const size_t open = hex.find("(+"); open != std::string::npos) {
    absl::string_view tail = absl::string_view(hex).substr(open + 2);
    if (!absl::ConsumeSuffix(&tail, " zero bytes)") || !absl::SimpleAtoi(tail, &zeros)) {
      return absl::InvalidArgumentError(absl::StrCat("'", value, "' is not a byte string"));
    }
    hex = std::string(absl::StripAsciiWhitespace(hex.substr(0, open)));
  }
  if (hex.size() % 2 != 0 || hex.size() / 2 + zeros != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", value, "' is not ", n, " bytes"));
  }
  for (size_t i = 0; i < hex.size() / 2; ++i) {
    uint32_t b = 0;
    if (!absl::SimpleHexAtoi(absl::string_view(hex).substr(2 * i, 2), &b)) {
      return absl::InvalidArgumentError(absl::StrCat("'", value, "' is not hex"));
    }
    table[row.byte + i] = static_cast<uint8_t>(b);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DumpText> ParseDumpText(absl::string_view text) {
  static const Layout kHeader{"MAD", 0, mad_header::kRows, {}};
  DumpText out;
  DumpedMad* current = nullptr;
  bool expect_summary = false;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const std::string s(line);
    std::smatch m;
    if (std::regex_match(s, m, MadLine())) {
      current = &out.mads.emplace_back();
      current->frame = std::stoll(m[1]);
      current->src = m[2];
      current->dst = m[3];
      current->dest_qp = static_cast<uint32_t>(std::stoul(m[4]));
      current->summary = m[5];
      expect_summary = true;
      continue;
    }
    if (std::regex_match(s, m, BadLine())) {
      out.not_decodable.push_back(std::stoll(m[1]));
      current = nullptr;
      continue;
    }
    if (current != nullptr && expect_summary) {  // Dump() repeats the summary first
      expect_summary = false;
      if (s != current->summary) return LineError(line_no, line, "expected the MAD's summary (is it uscm dump --verbose?)");
      continue;
    }
    if (!std::regex_match(s, m, FieldLine())) {
      current = nullptr;  // the header, the summary lines, frames without a MAD
      continue;
    }
    if (current == nullptr) return LineError(line_no, line, "a field line outside a MAD");
    const uint32_t byte = std::stoul(m[1]);
    const uint32_t bit = m[2].matched ? std::stoul(m[2]) : 0;
    const std::string layout_name = m[3], row_name = m[4], value = m[5];
    std::vector<const Layout*> layouts = {&kHeader};
    if (layout_name != "MAD") {
      const uint16_t attr = static_cast<uint16_t>(current->mad[16] << 8 | current->mad[17]);
      for (const Layout* l : LayoutsFor(current->mad[1], attr)) layouts.push_back(l);
    }
    const Layout* layout = nullptr;
    const Field* row = nullptr;
    bool name_seen = false;
    for (const Layout* l : layouts) {
      if (layout_name != l->name) continue;
      for (const Field& f : l->rows) {
        if (row_name != f.name) continue;
        name_seen = true;
        if (l->offset + f.byte == byte && f.bit == bit) {
          layout = l;
          row = &f;
        }
      }
    }
    if (row == nullptr) {
      return LineError(line_no, line,
                       name_seen ? "the tables have this row at another position"
                                 : "no row of this MAD's tables has this name");
    }
    if (absl::Status s = Place(*row, layout->offset, value, current->mad); !s.ok()) {
      return LineError(line_no, line, s.message());
    }
    current->fields.push_back({absl::StrCat(layout_name, ".", row_name),
                               static_cast<uint32_t>(layout->offset * 8 + row->begin_bit()),
                               static_cast<uint32_t>(layout->offset * 8 + row->end_bit()),
                               value});
  }
  return out;
}

}  // namespace uscm::mad::wire
