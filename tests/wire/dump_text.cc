#include "tests/wire/dump_text.h"

#include <cstring>
#include <algorithm>

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

// The next run of non-blank characters of `rest`, consumed with the blanks before it.
absl::string_view Token(absl::string_view& rest) {
  rest = absl::StripLeadingAsciiWhitespace(rest);
  const size_t end = std::min(rest.find(' '), rest.size());
  absl::string_view t = rest.substr(0, end);
  rest.remove_prefix(end);
  return t;
}

bool AllOf(absl::string_view t, absl::string_view chars) {
  return !t.empty() && t.find_first_not_of(chars) == absl::string_view::npos;
}

// A frame line's "#" and time columns: "    1 1795324111.006895  ...".
bool FrameColumns(absl::string_view& rest, int64_t* frame) {
  absl::string_view n = Token(rest), time = Token(rest);
  return AllOf(n, "0123456789") && AllOf(time, "0123456789.") && absl::SimpleAtoi(n, frame);
}

// "    1 1795324111.006895  192.168.78.2 -> 192.168.78.1 QP1   CM REQ Send ..."
bool MadLine(absl::string_view line, DumpedMad* m) {
  absl::string_view rest = line;
  if (!FrameColumns(rest, &m->frame)) return false;
  m->src = std::string(Token(rest));
  if (Token(rest) != "->") return false;
  m->dst = std::string(Token(rest));
  absl::string_view qp = Token(rest);
  if (!absl::ConsumePrefix(&qp, "QP") || !absl::SimpleAtoi(qp, &m->dest_qp)) return false;
  m->summary = std::string(absl::StripLeadingAsciiWhitespace(rest));
  return !m->summary.empty();
}

// "    7 1795324111.9  not decodable: why"
bool BadLine(absl::string_view line, int64_t* frame) {
  absl::string_view rest = line;
  return FrameColumns(rest, frame) &&
         absl::StartsWith(absl::StripLeadingAsciiWhitespace(rest), "not decodable: ");
}

struct FieldText {
  uint32_t byte = 0, bit = 0;
  std::string layout, row, value;
};

// "  MAD+67[5]  REQ.TransportServiceType           0x0"
bool FieldLine(absl::string_view line, FieldText* f) {
  if (!absl::ConsumePrefix(&line, "  MAD+")) return false;
  absl::string_view where = Token(line), name = Token(line);
  absl::string_view bit = "0";
  if (const size_t open = where.find('['); open != absl::string_view::npos) {
    bit = where.substr(open + 1);
    where = where.substr(0, open);
    if (!absl::ConsumeSuffix(&bit, "]")) return false;
  }
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos || !AllOf(where, "0123456789") || !AllOf(bit, "01234567") ||
      !absl::SimpleAtoi(where, &f->byte) || !absl::SimpleAtoi(bit, &f->bit)) {
    return false;
  }
  f->layout = std::string(name.substr(0, dot));
  f->row = std::string(name.substr(dot + 1));
  f->value = std::string(absl::StripLeadingAsciiWhitespace(line));
  return !f->row.empty() && !f->value.empty();
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
    DumpedMad next;
    int64_t bad_frame = 0;
    FieldText ft;
    if (MadLine(line, &next)) {
      current = &out.mads.emplace_back(std::move(next));
      expect_summary = true;
      continue;
    }
    if (BadLine(line, &bad_frame)) {
      out.not_decodable.push_back(bad_frame);
      current = nullptr;
      continue;
    }
    if (current != nullptr && expect_summary) {  // Dump() repeats the summary first
      expect_summary = false;
      if (line != current->summary) {
        return LineError(line_no, line, "expected the MAD's summary (is it uscm dump --verbose?)");
      }
      continue;
    }
    if (!FieldLine(line, &ft)) {
      current = nullptr;  // the header, the summary lines, frames without a MAD
      continue;
    }
    if (current == nullptr) return LineError(line_no, line, "a field line outside a MAD");
    const uint32_t byte = ft.byte, bit = ft.bit;
    const std::string& layout_name = ft.layout;
    const std::string& row_name = ft.row;
    const std::string& value = ft.value;
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
