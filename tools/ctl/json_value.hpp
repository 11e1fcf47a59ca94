// JsonValue: a small JSON reader for unetback-ctl, enough for the daemon's replies (RFC 8259:
// objects, arrays, strings with escapes incl. \uXXXX and surrogate pairs, numbers, literals).
// Numbers keep their text so 64-bit counters print exactly. Depth and size are bounded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace unetback::ctl {

class JsonValue {
 public:
  struct Number {
    std::string text;
  };
  using Array = std::vector<JsonValue>;
  using Object = std::vector<std::pair<std::string, JsonValue>>;  // in document order

  JsonValue() = default;  // null
  explicit JsonValue(bool b) : v_(b) {}
  explicit JsonValue(Number n) : v_(std::move(n)) {}
  explicit JsonValue(std::string s) : v_(std::move(s)) {}
  explicit JsonValue(Array a) : v_(std::move(a)) {}
  explicit JsonValue(Object o) : v_(std::move(o)) {}

  [[nodiscard]] bool is_null() const { return v_.index() == 0; }
  [[nodiscard]] const bool* as_bool() const { return std::get_if<bool>(&v_); }
  [[nodiscard]] const Number* as_number() const { return std::get_if<Number>(&v_); }
  [[nodiscard]] const std::string* as_string() const { return std::get_if<std::string>(&v_); }
  [[nodiscard]] const Array* as_array() const { return std::get_if<Array>(&v_); }
  [[nodiscard]] const Object* as_object() const { return std::get_if<Object>(&v_); }

  /// The member `key` of an object (the first one), or nullptr.
  [[nodiscard]] const JsonValue* get(std::string_view key) const;
  /// A scalar as text for tables: strings as they are, numbers as written, true/false, "-"
  /// for null or a missing value.
  [[nodiscard]] std::string text() const;

 private:
  std::variant<std::monostate, bool, Number, std::string, Array, Object> v_;
};

/// The document, or nullopt with `error` set when the text is not one well-formed JSON value.
[[nodiscard]] std::optional<JsonValue> parse_json(std::string_view text,
                                                  std::string* error = nullptr);

/// `v.get(key)->text()`, "-" when absent.
[[nodiscard]] std::string field(const JsonValue& v, std::string_view key);

}  // namespace unetback::ctl
