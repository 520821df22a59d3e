#include "tests/wire/dump_vs_tshark.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/wire/tshark_compare.h"

namespace uscm::mad::wire {
namespace {

using capture::TsharkField;
using capture::TsharkFrame;

// "CM REQ" from "CM REQ Send tid=...".
std::string MessageName(const DumpedMad& m) {
  std::vector<std::string> words = absl::StrSplit(m.summary, ' ');
  return words.size() >= 2 ? absl::StrCat(words[0], " ", words[1]) : m.summary;
}

// The dump's field lines that overlap MAD bits [begin, end), for messages.
std::string Printed(const DumpedMad& m, uint32_t begin, uint32_t end) {
  std::vector<std::string> out;
  for (const DumpedField& f : m.fields) {
    if (f.begin_bit < end && begin < f.end_bit) out.push_back(absl::StrCat(f.name, " ", f.value));
  }
  return out.empty() ? "nothing (reserved, zero)" : absl::StrJoin(out, ", ");
}

// The frame's addressing as tshark shows it against the dump's MAD line.
void CompareAddressing(const DumpedMad& m, const TsharkFrame& t, std::vector<std::string>& bad) {
  for (const char* family : {"ip", "ipv6"}) {
    const auto& src = t.GetAll(absl::StrCat(family, ".src"));
    const auto& dst = t.GetAll(absl::StrCat(family, ".dst"));
    if (src.empty() || dst.empty()) continue;
    if (src.front().show != m.src || dst.front().show != m.dst) {
      bad.push_back(absl::StrFormat("frame %d: uscm dump says %s -> %s, tshark %s -> %s",
                                    m.frame, m.src, m.dst, src.front().show, dst.front().show));
    }
  }
  const auto& qp = t.GetAll("infiniband.bth.destqp");
  if (qp.empty() || qp.front().AsUint() != m.dest_qp) {
    bad.push_back(absl::StrFormat("frame %d: uscm dump says QP%d, tshark's BTH DestQP is %s",
                                  m.frame, m.dest_qp, qp.empty() ? "missing" : qp.front().show));
  }
}

// For a byte string that differs (infiniband.mad.data, ...): the first MAD
// byte where tshark's bytes and the dump's differ, and the dump's field there.
std::string FirstDifference(const DumpedMad& m, const TsharkField& f, uint32_t begin, uint32_t end) {
  std::string hex = absl::StrReplaceAll(f.show, {{":", ""}});
  if (hex.size() != (end - begin) / 4) hex = f.raw_hex;
  for (uint32_t byte = begin / 8; byte < end / 8 && hex.size() >= 2 * (byte - begin / 8 + 1);
       ++byte) {
    uint32_t theirs = 0;
    if (!absl::SimpleHexAtoi(absl::string_view(hex).substr(2 * (byte - begin / 8), 2), &theirs)) {
      break;
    }
    if (theirs != m.mad[byte]) {
      return absl::StrFormat("first at MAD byte %d: tshark 0x%02x, the dump 0x%02x (%s)", byte,
                             theirs, m.mad[byte], Printed(m, byte * 8, byte * 8 + 8));
    }
  }
  return "bytes differ";
}

void CompareMad(const DumpedMad& m, const TsharkFrame& t, DumpVsTshark& r) {
  // Bit ranges tshark decodes (and agrees on) exactly, for the per-field count.
  std::set<std::pair<uint32_t, uint32_t>> agreed, differed;
  for (const auto& [name, occurrences] : t.fields()) {
    if (!absl::StartsWith(name, "infiniband.") || TsharkMisdecodes(name)) continue;
    for (const TsharkField& f : occurrences) {
      uint32_t begin, end;
      if (!TsharkBits(f, &begin, &end)) continue;  // outside the MAD (BTH, DETH, ICRC)
      ++r.tshark_values;
      const std::string diff = CompareValue(f, m.mad, begin, end);
      if (diff.empty()) {
        ++r.tshark_values_equal;
        agreed.insert({begin, end});
        continue;
      }
      differed.insert({begin, end});
      if (end - begin > 128) {  // a container: name the first byte that differs
        r.disagreements.push_back(absl::StrFormat("frame %d %s: tshark %s (MAD bytes %d..%d) %s",
                                                  m.frame, MessageName(m), name, begin / 8,
                                                  end / 8 - 1, FirstDifference(m, f, begin, end)));
        continue;
      }
      r.disagreements.push_back(absl::StrFormat(
          "frame %d %s: tshark %s (MAD bits %d..%d) = %s, uscm dump printed %s: %s", m.frame,
          MessageName(m), name, begin, end, f.show, Printed(m, begin, end), diff));
    }
  }
  for (const DumpedField& f : m.fields) {
    const std::pair<uint32_t, uint32_t> bits{f.begin_bit, f.end_bit};
    if (agreed.contains(bits) && !differed.contains(bits)) {
      ++r.fields_agreed;
    } else if (!differed.contains(bits)) {
      ++r.not_named_by_tshark[f.name];
    }
  }
}

}  // namespace

int64_t DumpVsTshark::total_mads() const {
  int64_t n = 0;
  for (const auto& [name, count] : mads) n += count;
  return n;
}

DumpVsTshark CompareDumpWithTshark(const DumpText& dump, const std::vector<TsharkFrame>& frames) {
  DumpVsTshark r;
  std::map<int64_t, const TsharkFrame*> by_number;
  for (const TsharkFrame& t : frames) by_number[t.number] = &t;
  std::set<int64_t> dumped;
  for (const DumpedMad& m : dump.mads) {
    dumped.insert(m.frame);
    auto it = by_number.find(m.frame);
    if (it == by_number.end() || !it->second->Has("infiniband.mad.baseversion")) {
      r.disagreements.push_back(absl::StrFormat(
          "frame %d: uscm dump prints %s; tshark decodes no MAD in that frame", m.frame,
          MessageName(m)));
      continue;
    }
    ++r.mads[MessageName(m)];
    CompareAddressing(m, *it->second, r.disagreements);
    CompareMad(m, *it->second, r);
  }
  for (const TsharkFrame& t : frames) {
    if (!t.Has("infiniband.mad.baseversion") || dumped.contains(t.number)) continue;
    const auto& cls = t.GetAll("infiniband.mad.mgmtclass");
    const auto& attr = t.GetAll("infiniband.mad.attributeid");
    r.disagreements.push_back(absl::StrFormat(
        "frame %d: tshark decodes a MAD (class %s, attribute %s); uscm dump printed none",
        t.number, cls.empty() ? "?" : cls.front().show, attr.empty() ? "?" : attr.front().show));
  }
  return r;
}

std::string FormatReport(const DumpVsTshark& r) {
  std::vector<std::string> kinds;
  for (const auto& [name, count] : r.mads) kinds.push_back(absl::StrCat(name, " ", count));
  std::string out = absl::StrFormat(
      "%d MADs compared (%s): %d of %d tshark values equal to the dump's bits; %d dump "
      "fields decoded by tshark at the same bits with the same value; %d disagreements\n",
      r.total_mads(), absl::StrJoin(kinds, ", "), r.tshark_values_equal,
      r.tshark_values, r.fields_agreed, r.disagreements.size());
  if (!r.not_named_by_tshark.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, count] : r.not_named_by_tshark) names.push_back(name);
    absl::StrAppend(&out, "dump fields tshark has no field for (compared as bytes of "
                          "infiniband.mad.data or a wider field): ",
                    absl::StrJoin(names, ", "), "\n");
  }
  for (const std::string& d : r.disagreements) absl::StrAppend(&out, "DIFFERS: ", d, "\n");
  return out;
}

}  // namespace uscm::mad::wire
