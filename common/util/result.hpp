// Result<T, E>: a value or an error, for guest-caused and expected runtime failures (STYLE
// rule 7). C++20 has no std::expected; this is the small subset we need. E is a
// std::error_code unless a caller needs to say more (xenbus: which key was wrong and why).
#pragma once

#include <cassert>
#include <cerrno>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace unetback {

/// The error_code for an errno value (generic category, so `== std::errc::...` works).
inline std::error_code errno_code(int e) {
  return {e, std::generic_category()};
}
/// The error_code for the current `errno`.
inline std::error_code last_errno() {
  return errno_code(errno);
}
/// The error of a failed library call that sets errno (libxenstore, libxenevtchn): `errno`, or
/// EIO should a library path fail without setting one.
inline std::error_code library_call_error() {
  return errno != 0 ? last_errno() : errno_code(EIO);
}

template <typename T, typename E = std::error_code>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::decay_t<T>, E>);
  static constexpr bool kErrorCode = std::is_same_v<E, std::error_code>;

 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(E e) : v_(std::in_place_index<1>, std::move(e)) {           // NOLINT: implicit by design
    if constexpr (kErrorCode) assert(std::get<1>(v_));
  }
  Result(std::errc e)  // NOLINT: implicit by design
      requires kErrorCode : Result(std::make_error_code(e)) {}

  [[nodiscard]] bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  [[nodiscard]] T& value() & {
    assert(has_value());
    return std::get<0>(v_);
  }
  [[nodiscard]] const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  [[nodiscard]] T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The error. A std::error_code is empty (success) when there is a value; any other error
  /// type is there only when there is no value.
  [[nodiscard]] std::error_code error() const requires kErrorCode {
    return has_value() ? std::error_code{} : std::get<1>(v_);
  }
  [[nodiscard]] const E& error() const requires(!kErrorCode) {
    assert(!has_value());
    return std::get<1>(v_);
  }

  template <typename U>
  [[nodiscard]] T value_or(U&& fallback) const& {
    return has_value() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, E> v_;
};

/// An exception for setup failures (exceptions only for setup, caught in main: docs/design.md,
/// "Conventions").
/// When a system call failed, code() is its errno (a vif's connect reports it to the guest).
class SetupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  SetupError(const std::string& what, std::error_code ec) : std::runtime_error(what), code_(ec) {}
  /// The system error behind it, or an empty code.
  [[nodiscard]] std::error_code code() const { return code_; }

 private:
  std::error_code code_;
};

}  // namespace unetback
