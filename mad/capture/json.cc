#include "mad/capture/json.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::mad::capture {

absl::optional<int64_t> JsonValue::AsInt64() const {
  int64_t v = 0;
  if (type_ != Type::kNumber || !absl::SimpleAtoi(text_, &v)) return absl::nullopt;
  return v;
}

const JsonValue* JsonValue::Find(absl::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

class JsonParser {
 public:
  explicit JsonParser(absl::string_view in) : in_(in) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    JsonValue v;
    if (absl::Status s = ParseValue(v, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != in_.size()) return Error("unexpected data after the JSON value");
    return v;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    const size_t at = std::min(pos_, in_.size());
    const size_t line = 1 + std::count(in_.begin(), in_.begin() + at, '\n');
    return absl::InvalidArgumentError(
        absl::StrCat("JSON: ", what, " at byte ", at, " (line ", line, ")"));
  }

  void SkipSpace() {
    while (pos_ < in_.size() &&
           (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status ParseValue(JsonValue& v, int depth) {
    if (depth >= kMaxJsonDepth) {
      return Error(absl::StrCat("nesting deeper than ", kMaxJsonDepth));
    }
    SkipSpace();
    if (pos_ >= in_.size()) return Error("expected a value, found the end");
    switch (in_[pos_]) {
      case '{': return ParseObject(v, depth);
      case '[': return ParseArray(v, depth);
      case '"':
        v.type_ = JsonValue::Type::kString;
        return ParseString(v.text_);
      case 't': return ParseLiteral("true", v, JsonValue::Type::kBool, true);
      case 'f': return ParseLiteral("false", v, JsonValue::Type::kBool, false);
      case 'n': return ParseLiteral("null", v, JsonValue::Type::kNull, false);
      default: return ParseNumber(v);
    }
  }

  absl::Status ParseLiteral(absl::string_view word, JsonValue& v, JsonValue::Type type,
                            bool b) {
    if (in_.substr(pos_, word.size()) != word) {
      return Error(absl::StrCat("expected '", word, "'"));
    }
    pos_ += word.size();
    v.type_ = type;
    v.boolean_ = b;
    return absl::OkStatus();
  }

  absl::Status ParseNumber(JsonValue& v) {
    const size_t start = pos_;
    auto digits = [this] {
      const size_t s = pos_;
      while (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') ++pos_;
      return pos_ - s;
    };
    Consume('-');
    if (Consume('0')) {
      // no leading zeros
    } else if (digits() == 0) {
      return Error("expected a value");
    }
    if (Consume('.') && digits() == 0) return Error("expected digits after '.'");
    if (Consume('e') || Consume('E')) {
      if (!Consume('+')) Consume('-');
      if (digits() == 0) return Error("expected exponent digits");
    }
    v.type_ = JsonValue::Type::kNumber;
    v.text_ = std::string(in_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (in_.size() - pos_ < 4) return Error("truncated \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = in_[pos_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= c - '0';
      else if (c >= 'a' && c <= 'f') cp |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') cp |= c - 'A' + 10;
      else return Error("bad hex digit in \\u escape");
    }
    return cp;
  }

  static void AppendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  absl::Status ParseString(std::string& out) {
    ++pos_;  // opening quote
    out.clear();
    while (true) {
      if (pos_ >= in_.size()) return Error("unterminated string");
      const char c = in_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        return Error("control character in string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= in_.size()) return Error("unterminated string");
      const char e = in_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          absl::StatusOr<uint32_t> cp = ParseHex4();
          if (!cp.ok()) return cp.status();
          if (*cp >= 0xDC00 && *cp <= 0xDFFF) return Error("lone low surrogate");
          if (*cp >= 0xD800 && *cp <= 0xDBFF) {
            if (!Consume('\\') || !Consume('u')) return Error("high surrogate without a pair");
            absl::StatusOr<uint32_t> low = ParseHex4();
            if (!low.ok()) return low.status();
            if (*low < 0xDC00 || *low > 0xDFFF) return Error("bad low surrogate");
            *cp = 0x10000 + ((*cp - 0xD800) << 10) + (*low - 0xDC00);
          }
          AppendUtf8(out, *cp);
          break;
        }
        default:
          --pos_;
          return Error(absl::StrFormat("bad escape '\\%c'", e));
      }
    }
  }

  absl::Status ParseArray(JsonValue& v, int depth) {
    ++pos_;
    v.type_ = JsonValue::Type::kArray;
    SkipSpace();
    if (Consume(']')) return absl::OkStatus();
    while (true) {
      v.items_.emplace_back();
      if (absl::Status s = ParseValue(v.items_.back(), depth + 1); !s.ok()) return s;
      SkipSpace();
      if (Consume(']')) return absl::OkStatus();
      if (!Consume(',')) return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseObject(JsonValue& v, int depth) {
    ++pos_;
    v.type_ = JsonValue::Type::kObject;
    SkipSpace();
    if (Consume('}')) return absl::OkStatus();
    while (true) {
      SkipSpace();
      if (pos_ >= in_.size() || in_[pos_] != '"') return Error("expected a member name");
      v.keys_.emplace_back();
      if (absl::Status s = ParseString(v.keys_.back()); !s.ok()) return s;
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      v.items_.emplace_back();
      if (absl::Status s = ParseValue(v.items_.back(), depth + 1); !s.ok()) return s;
      SkipSpace();
      if (Consume('}')) return absl::OkStatus();
      if (!Consume(',')) return Error("expected ',' or '}'");
    }
  }

  absl::string_view in_;
  size_t pos_ = 0;
};

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return JsonParser(text).ParseDocument();
}

}  // namespace uscm::mad::capture
