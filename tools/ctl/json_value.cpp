#include "tools/ctl/json_value.hpp"

namespace unetback::ctl {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::optional<JsonValue> document(std::string* error) {
    auto v = value(0);
    skip_ws();
    if (v && i_ != s_.size()) fail("trailing characters");
    if (!error_.empty()) {
      if (error != nullptr) *error = error_ + " at offset " + std::to_string(i_);
      return std::nullopt;
    }
    return v;
  }

 private:
  std::optional<JsonValue> fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    return std::nullopt;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  std::optional<JsonValue> value(int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    skip_ws();
    if (i_ >= s_.size()) return fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      auto str = string();
      if (!str) return std::nullopt;
      return JsonValue(std::move(*str));
    }
    if (literal("true")) return JsonValue(true);
    if (literal("false")) return JsonValue(false);
    if (literal("null")) return JsonValue();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    return fail("unexpected character");
  }

  std::optional<JsonValue> number() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    const auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > d;
    };
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return fail("bad number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return fail("bad number");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return fail("bad number");
    }
    return JsonValue(JsonValue::Number{std::string(s_.substr(start, i_ - start))});
  }

  std::optional<unsigned> hex4() {
    if (i_ + 4 > s_.size()) return std::nullopt;
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        return std::nullopt;
      }
    }
    return v;
  }

  static void utf8(std::string& out, unsigned cp) {
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

  std::optional<std::string> string() {
    ++i_;  // the opening quote
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        fail("control character in string");
        return std::nullopt;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      const char e = s_[i_++];
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
          auto cp = hex4();
          if (!cp) {
            fail("bad \\u escape");
            return std::nullopt;
          }
          if (*cp >= 0xD800 && *cp <= 0xDBFF && s_.substr(i_, 2) == "\\u") {
            const std::size_t save = i_;
            i_ += 2;
            auto lo = hex4();
            if (lo && *lo >= 0xDC00 && *lo <= 0xDFFF) {
              utf8(out, 0x10000 + ((*cp - 0xD800) << 10) + (*lo - 0xDC00));
              break;
            }
            i_ = save;
          }
          utf8(out, (*cp >= 0xD800 && *cp <= 0xDFFF) ? 0xFFFD : *cp);
          break;
        }
        default: fail("bad escape"); return std::nullopt;
      }
    }
    fail("unterminated string");
    return std::nullopt;
  }

  std::optional<JsonValue> array(int depth) {
    ++i_;
    JsonValue::Array a;
    if (eat(']')) return JsonValue(std::move(a));
    do {
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      a.push_back(std::move(*v));
    } while (eat(','));
    if (!eat(']')) return fail("expected , or ]");
    return JsonValue(std::move(a));
  }

  std::optional<JsonValue> object(int depth) {
    ++i_;
    JsonValue::Object o;
    if (eat('}')) return JsonValue(std::move(o));
    do {
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '"') return fail("expected a member name");
      auto k = string();
      if (!k) return std::nullopt;
      if (!eat(':')) return fail("expected :");
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      o.emplace_back(std::move(*k), std::move(*v));
    } while (eat(','));
    if (!eat('}')) return fail("expected , or }");
    return JsonValue(std::move(o));
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::string error_;
};

}  // namespace

const JsonValue* JsonValue::get(std::string_view key) const {
  const auto* o = as_object();
  if (o == nullptr) return nullptr;
  for (const auto& [k, v] : *o)
    if (k == key) return &v;
  return nullptr;
}

std::string JsonValue::text() const {
  if (const auto* s = as_string()) return *s;
  if (const auto* n = as_number()) return n->text;
  if (const auto* b = as_bool()) return *b ? "true" : "false";
  if (as_array() != nullptr) return "[...]";
  if (as_object() != nullptr) return "{...}";
  return "-";
}

std::optional<JsonValue> parse_json(std::string_view text, std::string* error) {
  return Parser(text).document(error);
}

std::string field(const JsonValue& v, std::string_view key) {
  const JsonValue* f = v.get(key);
  return f == nullptr ? "-" : f->text();
}

}  // namespace unetback::ctl
