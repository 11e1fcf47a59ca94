// Reading xenstore keys strictly: KeyResult<T> (a value, or which key was wrong and why),
// KeyReader (how a directory is read) and the scalar parsers both config parsers share.
#pragma once

#include <cassert>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace unetback::xenbus {

/// Which key was refused and why; `error` is the positive errno written to the error node
/// (EINVAL for a malformed value, ENOENT for a missing one, EOPNOTSUPP for a refused feature).
struct KeyError {
  std::string key;  // relative to the directory that was read
  std::string reason;
  int error = 0;
  friend bool operator==(const KeyError&, const KeyError&) = default;
};

template <typename T>
class [[nodiscard]] KeyResult {
 public:
  KeyResult(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  KeyResult(KeyError e) : v_(std::in_place_index<1>, std::move(e)) {}   // NOLINT: implicit

  [[nodiscard]] bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  [[nodiscard]] const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  [[nodiscard]] T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }
  [[nodiscard]] const KeyError& error() const {
    assert(!has_value());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, KeyError> v_;
};

/// Reads one key relative to a directory; nullopt when the key is absent (or unreadable,
/// which for a hostile directory is the same thing).
using KeyReader = std::function<std::optional<std::string>(std::string_view relative_key)>;

/// A boolean feature key: absent -> `absent`, "0"/"1" -> false/true, anything else -> EINVAL.
[[nodiscard]] KeyResult<bool> read_bool_key(const KeyReader& read, std::string_view key,
                                            bool absent);

/// A required unsigned 32-bit decimal key (hv::parse_xs_uint): absent -> ENOENT, junk -> EINVAL.
[[nodiscard]] KeyResult<std::uint32_t> read_u32_key(const KeyReader& read, std::string_view key);

}  // namespace unetback::xenbus
