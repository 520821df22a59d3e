// A small, strict JSON reader (RFC 8259), enough for `tshark -T json`.
// Objects keep member order and duplicate keys; numbers keep their text.
// Errors give the byte offset and line; nesting deeper than kMaxJsonDepth
// is rejected instead of overflowing the stack.
#ifndef USCM_MAD_CAPTURE_JSON_H_
#define USCM_MAD_CAPTURE_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace uscm::mad::capture {

inline constexpr int kMaxJsonDepth = 256;

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool boolean() const { return boolean_; }
  // The decoded string, or a number's text as written.
  const std::string& text() const { return text_; }
  // A number that is an integer in int64 range; nullopt otherwise.
  absl::optional<int64_t> AsInt64() const;

  // Array elements, or object member values.
  const std::vector<JsonValue>& items() const { return items_; }
  // Object member names, parallel to items().
  const std::vector<std::string>& keys() const { return keys_; }
  size_t size() const { return items_.size(); }
  // The first member named `key`, or null if absent or not an object.
  const JsonValue* Find(absl::string_view key) const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool boolean_ = false;
  std::string text_;
  std::vector<JsonValue> items_;
  std::vector<std::string> keys_;
};

absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_JSON_H_
