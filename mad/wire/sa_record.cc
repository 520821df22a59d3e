#include "mad/wire/sa_record.h"

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

const char* SelectorName(Selector s) {
  switch (s) {
    case Selector::kGreaterThan: return ">";
    case Selector::kLessThan: return "<";
    case Selector::kExactly: return "=";
    case Selector::kBest: return "best";
  }
  return "?";
}

std::vector<std::string> MaskBitNames(uint64_t bits, std::span<const char* const> names) {
  std::vector<std::string> out;
  for (size_t n = 0; n < 64; ++n) {
    if ((bits >> n & 1) == 0) continue;
    if (n < names.size() && names[n] != nullptr) {
      out.emplace_back(names[n]);
    } else {
      out.push_back(absl::StrFormat("bit%d", n));
    }
  }
  return out;
}

absl::Status CheckRecordLength(absl::string_view what, std::span<const Field> rows,
                               size_t available, size_t record_bytes) {
  if (available >= record_bytes) return absl::OkStatus();
  const Field* cut = nullptr;  // the first row, in wire order, that does not fit
  for (const Field& f : rows) {
    if (f.end_byte() > available && (cut == nullptr || f.begin_bit() < cut->begin_bit())) {
      cut = &f;
    }
  }
  if (cut == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s truncated: %d of %d bytes", what, available, record_bytes));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s truncated: %d of %d bytes; %s (record bytes %d..%d) is incomplete", what, available,
      record_bytes, cut->name, cut->byte, cut->end_byte() - 1));
}

absl::Status CheckRecordOutput(absl::string_view what, size_t available, size_t record_bytes) {
  if (available >= record_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s output buffer is %d bytes; the record needs %d", what, available, record_bytes));
}

}  // namespace uscm::mad::wire
