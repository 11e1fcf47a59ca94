// Strict parsing of unsigned decimal numbers from command lines, config values and xenstore:
// digits only (no sign, no spaces, no junk, no hex), at most 20 of them (the digits of 2^64 - 1;
// a guest's "000…0001" of any length is refused, not scanned), within [min, max]. One rule
// everywhere a number comes from outside, so that "8x", "-1", " 4" and 10^30 are refused the same
// way.
#pragma once

#include <charconv>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

namespace unetback {

/// The value of `s`, or nullopt if it is not a decimal number of at most 20 digits in
/// [min, max] (overflow of T included).
template <typename T>
[[nodiscard]] std::optional<T> parse_decimal(std::string_view s, T min = 0,
                                             T max = std::numeric_limits<T>::max()) {
  static_assert(std::numeric_limits<T>::is_integer && !std::numeric_limits<T>::is_signed);
  if (s.empty() || s.size() > 20) return std::nullopt;
  for (const char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v < min || v > max) return std::nullopt;
  return v;
}

}  // namespace unetback
