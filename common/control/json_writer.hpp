// JsonWriter: builds one JSON document as a string, for the control socket's one-line replies.
// Strings are escaped per RFC 8259 (quote, backslash, every control character); bytes that are
// not valid UTF-8 (names can come from xenstore) become U+FFFD so the output is always valid.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace unetback::control {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  /// An object member's name; the next value call is its value.
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(std::uint64_t n);
  JsonWriter& value(std::int64_t n);
  JsonWriter& value(std::uint32_t n) { return value(static_cast<std::uint64_t>(n)); }
  JsonWriter& value(int n) { return value(static_cast<std::int64_t>(n)); }
  JsonWriter& value(bool b);
  JsonWriter& null();

  /// The document so far (complete once every begin has its end).
  [[nodiscard]] const std::string& str() const { return out_; }

 private:
  void before_value();

  std::string out_;
  // Per open container: whether it has an element yet (for the commas).
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

/// `s` as a JSON string literal, quotes included.
[[nodiscard]] std::string json_quote(std::string_view s);

/// The error reply: {"error": "<message>"} (kErrorKey).
[[nodiscard]] std::string json_error(std::string_view message);

}  // namespace unetback::control
