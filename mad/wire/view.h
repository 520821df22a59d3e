// Views over MAD bytes. A FieldView is created once through a length check
// whose error names the first field that does not fit; after that every read
// is infallible. A FieldWriter emits a table into a buffer the caller sized,
// keeping the first out-of-range value as its error (setters never mask).
#ifndef USCM_MAD_WIRE_VIEW_H_
#define USCM_MAD_WIRE_VIEW_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/wire/field.h"

namespace uscm::mad::wire {

// The error for a buffer that ends inside `rows`: "<what> truncated: 100 of 256
// bytes; PrimaryLocalPortGID (MAD bytes 80..95) is incomplete". `offset` is where
// the table starts inside `available` bytes; `total` is the full MAD length.
absl::Status TruncationError(absl::string_view what, std::span<const Field> rows,
                             size_t offset, size_t available, size_t total);

class FieldView {
 public:
  // Checks that `bytes` holds `length` bytes starting at `offset`.
  static absl::StatusOr<FieldView> Create(std::span<const uint8_t> bytes, size_t offset,
                                          size_t length, std::span<const Field> rows,
                                          absl::string_view what, size_t total);

  // Unchecked: for emitters and for callers that already checked the length.
  static FieldView Unchecked(const uint8_t* base) { return FieldView(base); }

  [[gnu::always_inline]] uint64_t Get(const Field& f) const { return ReadField(base_, f); }
  template <size_t K>
  uint64_t Get(const SplitField<K>& f) const {
    return ReadSplit(base_, f);
  }
  [[gnu::always_inline]] std::span<const uint8_t> Bytes(const Field& f) const {
    return {base_ + f.byte, static_cast<size_t>(f.width / 8)};
  }
  const uint8_t* base() const { return base_; }

 private:
  explicit FieldView(const uint8_t* base) : base_(base) {}
  const uint8_t* base_;
};

class FieldWriter {
 public:
  // `what` prefixes error messages ("REQ"); `base` points at the table's byte 0.
  FieldWriter(absl::string_view what, uint8_t* base) : what_(what), base_(base) {}

  // Writes zeros into every reserved row of `kRows` (the table this writer
  // emits): a few word operations with masks built at compile time.
  template <const auto& kRows>
  [[gnu::always_inline]] void ZeroReserved() {
    ClearReserved(base_, kReservedWords<kRows>);
  }
  void Zero(const Field& f) {
    if (f.is_bytes()) {
      std::memset(base_ + f.byte, 0, f.width / 8);
    } else {
      WriteField(base_, f, 0);
    }
  }
  // Writes `value`, or records "REQ.RetryCount = 9 does not fit in 3 bits (max 7)".
  // Inline: with a constexpr row this is a range check and a few shifts.
  [[gnu::always_inline]] void Set(const Field& f, uint64_t value) {
    if (value > f.max_value()) [[unlikely]] {
      OutOfRange(f.name, value, f.width, f.max_value());
      return;
    }
    WriteField(base_, f, value);
  }
  template <size_t K>
  void Set(const SplitField<K>& f, uint64_t value) {
    if (value > f.max_value()) {
      Fail(RangeError(f.name, value, f.width(), f.max_value()));
      return;
    }
    WriteSplit(base_, f, value);
  }
  // Copies `src` into a byte-string field and zero-fills the rest; longer
  // input records "REQ private data is 100 bytes; REQ carries at most 92".
  [[gnu::always_inline]] void SetBytes(const Field& f, std::span<const uint8_t> src,
                                       absl::string_view noun) {
    const size_t capacity = f.width / 8;
    if (src.size() > capacity) [[unlikely]] {
      TooLong(f, src.size(), noun);
      return;
    }
    if (!src.empty()) std::memcpy(base_ + f.byte, src.data(), src.size());
    std::memset(base_ + f.byte + src.size(), 0, capacity - src.size());
  }
  // For fixed-size values (GIDs, keys): copies min(src, row) bytes and
  // zero-fills the rest of the row.
  void SetBytes(const Field& f, std::span<const uint8_t> src) {
    const size_t n = std::min<size_t>(src.size(), f.width / 8);
    if (n != 0) std::memcpy(base_ + f.byte, src.data(), n);
    std::memset(base_ + f.byte + n, 0, f.width / 8 - n);
  }

  // Records `s` unless an earlier error is already recorded (semantic checks
  // of the repr, e.g. "REJ ARI is 80 bytes; the field holds 72").
  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const absl::Status& status() const { return status_; }
  absl::string_view what() const { return what_; }

 private:
  absl::Status RangeError(const char* name, uint64_t value, uint32_t width,
                          uint64_t max) const;
  [[gnu::cold]] void OutOfRange(const char* name, uint64_t value, uint32_t width,
                                uint64_t max) {
    Fail(RangeError(name, value, width, max));
  }
  // Records the error for SetBytes with `size` bytes and zero-fills the row.
  [[gnu::cold]] void TooLong(const Field& f, size_t size, absl::string_view noun);
  absl::string_view what_;
  uint8_t* base_;
  absl::Status status_;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_VIEW_H_
