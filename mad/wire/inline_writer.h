// A FieldWriter whose setters inline: with a constexpr row, Set compiles to a
// range check and a few shifts (no call, no table walk), which is what makes
// the SA emitters fast (see tests/bench/wire_bench.cc). Same contract and
// error text as FieldWriter: the first out-of-range value is kept as the
// error and nothing is masked silently. Reserved rows are zeroed one by one
// with Zero(row) instead of by scanning the table for their names.
#ifndef USCM_MAD_WIRE_INLINE_WRITER_H_
#define USCM_MAD_WIRE_INLINE_WRITER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/status.h"
#include "mad/wire/field.h"

namespace uscm::mad::wire {

// "PathRecord.MTU = 64 does not fit in 6 bits (max 63)".
absl::Status FieldRangeError(const char* what, const Field& f, uint64_t value);

class InlineWriter {
 public:
  // `what` prefixes error messages and must outlive the writer.
  InlineWriter(const char* what, uint8_t* base) : what_(what), base_(base) {}

  void Set(const Field& f, uint64_t value) {
    if (value > f.max_value()) [[unlikely]] {
      Fail(FieldRangeError(what_, f, value));
      return;
    }
    WriteField(base_, f, value);
  }
  // Copies `src` into a byte-string row, zero-filling what it does not cover
  // (callers pass arrays of exactly the row's size).
  void SetBytes(const Field& f, std::span<const uint8_t> src) {
    const size_t n = std::min<size_t>(src.size(), f.width / 8);
    std::memcpy(base_ + f.byte, src.data(), n);
    std::memset(base_ + f.byte + n, 0, f.width / 8 - n);
  }
  void Zero(const Field& f) {
    if (f.is_bytes()) {
      std::memset(base_ + f.byte, 0, f.width / 8);
    } else {
      WriteField(base_, f, 0);
    }
  }

  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const absl::Status& status() const { return status_; }
  const char* what() const { return what_; }

 private:
  const char* what_;
  uint8_t* base_;
  absl::Status status_;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_INLINE_WRITER_H_
