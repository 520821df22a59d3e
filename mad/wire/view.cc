#include "mad/wire/view.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

absl::Status TruncationError(absl::string_view what, std::span<const Field> rows,
                             size_t offset, size_t available, size_t total) {
  // The first row, in wire order, whose last byte lies beyond the buffer.
  const Field* cut = nullptr;
  for (const Field& f : rows) {
    if (offset + f.end_byte() > available && (cut == nullptr || f.begin_bit() < cut->begin_bit())) {
      cut = &f;
    }
  }
  if (cut == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s truncated: %d of %d bytes", what, available, total));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s truncated: %d of %d bytes; %s (MAD bytes %d..%d) is incomplete", what, available,
      total, cut->name, offset + cut->byte, offset + cut->end_byte() - 1));
}

absl::StatusOr<FieldView> FieldView::Create(std::span<const uint8_t> bytes, size_t offset,
                                            size_t length, std::span<const Field> rows,
                                            absl::string_view what, size_t total) {
  if (bytes.size() < offset + length) {
    return TruncationError(what, rows, offset, bytes.size(), total);
  }
  return FieldView(bytes.data() + offset);
}

absl::Status FieldWriter::RangeError(const char* name, uint64_t value, uint32_t width,
                                     uint64_t max) const {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s.%s = %d does not fit in %d bits (max %d)", what_, name, value, width, max));
}

void FieldWriter::TooLong(const Field& f, size_t size, absl::string_view noun) {
  const size_t capacity = f.width / 8;
  Fail(absl::InvalidArgumentError(absl::StrFormat("%s %s is %d bytes; %s carries at most %d",
                                                  what_, noun, size, what_, capacity)));
  std::memset(base_ + f.byte, 0, capacity);
}

}  // namespace uscm::mad::wire
