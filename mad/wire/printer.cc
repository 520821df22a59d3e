#include "mad/wire/printer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/gid.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/mad_header.h"

namespace uscm::mad::wire {
namespace {

bool IsZero(std::span<const uint8_t> table, const Field& f) {
  if (f.width <= 64) return ReadField(table.data(), f) == 0;
  for (uint8_t b : table.subspan(f.byte, f.width / 8)) {
    if (b != 0) return false;
  }
  return true;
}

std::string FormatValue(std::span<const uint8_t> table, const Field& f) {
  if (f.width <= 64) {
    const uint64_t v = ReadField(table.data(), f);
    if (f.width == 1) return absl::StrCat(v);
    return absl::StrFormat("0x%0*x", static_cast<int>((f.width + 3) / 4), v);
  }
  const auto bytes = table.subspan(f.byte, f.width / 8);
  if (bytes.size() == 16 && std::strstr(f.name, "GID") != nullptr) {
    Gid g;
    std::memcpy(g.raw.data(), bytes.data(), 16);
    return g.ToString();
  }
  size_t used = bytes.size();
  while (used > 0 && bytes[used - 1] == 0) --used;
  std::string out;
  for (size_t i = 0; i < used; ++i) absl::StrAppendFormat(&out, "%02x", bytes[i]);
  if (used < bytes.size()) {
    absl::StrAppendFormat(&out, "%s(+%d zero bytes)", used ? " " : "", bytes.size() - used);
  }
  return out;
}

const char* ClassName(uint8_t mgmt_class) {
  switch (static_cast<MgmtClass>(mgmt_class)) {
    case MgmtClass::kSubnAdm: return "SA";
    case MgmtClass::kCommMgt: return "CM";
  }
  return nullptr;
}

}  // namespace

std::string Summary(std::span<const uint8_t> mad) {
  if (mad.size() < kMadHeaderBytes) {
    return absl::StrFormat("short MAD (%d bytes)", mad.size());
  }
  const uint8_t cls = mad[1];
  const uint8_t method = mad[3];
  const uint16_t attr = static_cast<uint16_t>(mad[16] << 8 | mad[17]);
  const auto layouts = LayoutsFor(cls, attr);
  const char* cls_name = ClassName(cls);
  const char* method_name = MethodName(static_cast<Method>(method));
  std::string out = cls_name ? cls_name : absl::StrFormat("class 0x%02x", cls);
  absl::StrAppend(&out, " ", layouts.empty() ? absl::StrFormat("attr 0x%04x", attr)
                                             : std::string(layouts.back()->name));
  absl::StrAppend(&out, " ", method_name ? method_name : absl::StrFormat("method 0x%02x", method));
  uint64_t tid = 0;
  for (int i = 8; i < 16; ++i) tid = tid << 8 | mad[i];
  absl::StrAppendFormat(&out, " tid=0x%016x", tid);
  const uint16_t status = static_cast<uint16_t>(mad[4] << 8 | mad[5]);
  if (status != 0) absl::StrAppend(&out, " status=", StatusText(status));
  for (const Layout* l : layouts) {
    if (mad.size() < l->offset) break;
    for (const char* want : l->summary) {
      for (const Field& f : l->rows) {
        if (std::strcmp(f.name, want) != 0) continue;
        if (l->offset + f.end_byte() > mad.size()) break;
        absl::StrAppend(&out, " ", f.name, "=", FormatValue(mad.subspan(l->offset), f));
      }
    }
  }
  if (mad.size() < kMadBytes) absl::StrAppendFormat(&out, " [short: %d bytes]", mad.size());
  return out;
}

std::string Dump(std::span<const uint8_t> mad) {
  static const Layout kHeader{"MAD", 0, mad_header::kRows, {}};
  std::string out = absl::StrCat(Summary(mad), "\n");
  if (mad.size() < kMadHeaderBytes) return out;
  std::vector<const Layout*> layouts = {&kHeader};
  const uint16_t attr = static_cast<uint16_t>(mad[16] << 8 | mad[17]);
  for (const Layout* l : LayoutsFor(mad[1], attr)) layouts.push_back(l);
  for (const Layout* l : layouts) {
    for (const Field& f : l->rows) {
      if (l->offset + f.end_byte() > mad.size()) {
        absl::StrAppendFormat(&out, "  MAD+%-4d %s.%s  <truncated>\n", l->offset + f.byte,
                              l->name, f.name);
        return out;
      }
      const auto table = mad.subspan(l->offset);
      if (IsReserved(f) && IsZero(table, f)) continue;
      const std::string where = f.bit == 0 ? absl::StrFormat("MAD+%d", l->offset + f.byte)
                                           : absl::StrFormat("MAD+%d[%d]", l->offset + f.byte, f.bit);
      absl::StrAppendFormat(&out, "  %-10s %-34s %s\n", where, absl::StrCat(l->name, ".", f.name),
                            FormatValue(table, f));
    }
  }
  return out;
}

}  // namespace uscm::mad::wire
