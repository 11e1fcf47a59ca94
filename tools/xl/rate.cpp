#include "tools/xl/rate.hpp"

#include <cctype>
#include <limits>

namespace unetback::toolstack {
namespace {

constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

/// Leading decimal digits of `s` (consumed). EINVAL if none; EOVERFLOW above `limit`.
Result<std::uint64_t> take_number(std::string_view& s, std::uint64_t limit) {
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0) {
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
    if (v > limit) return std::errc::value_too_large;
    ++i;
  }
  if (i == 0) return std::errc::invalid_argument;
  s.remove_prefix(i);
  return v;
}

/// ^[0-9]+[GMK]?[Bb]/s$ in bytes per second.
Result<std::uint64_t> parse_bytes_per_sec(std::string_view s) {
  auto n = take_number(s, kU32Max);
  if (!n) return n.error();
  if (*n == 0) return std::errc::invalid_argument;  // xl: "rate overflow" for 0 too
  std::uint64_t v = *n;
  if (!s.empty() && (s.front() == 'G' || s.front() == 'M' || s.front() == 'K')) {
    v *= s.front() == 'G' ? 1'000'000'000ULL : s.front() == 'M' ? 1'000'000ULL : 1'000ULL;
    s.remove_prefix(1);
  }
  if (s != "B/s" && s != "b/s") return std::errc::invalid_argument;
  if (s.front() == 'b') v /= 8;                       // bits per second
  if (v == 0) return std::errc::result_out_of_range;  // 1..7 b/s: under a byte per second
  return v;
}

/// ^[0-9]+[mu]?s?$ in microseconds; no unit (or a bare "s") means seconds.
Result<std::uint32_t> parse_interval_usecs(std::string_view s) {
  auto n = take_number(s, kU32Max);
  if (!n) return n.error();
  if (*n == 0) return std::errc::invalid_argument;
  std::uint64_t mult = 1'000'000;
  if (!s.empty() && (s.front() == 'm' || s.front() == 'u')) {
    mult = s.front() == 'm' ? 1'000 : 1;
    s.remove_prefix(1);
  }
  if (!s.empty() && s != "s") return std::errc::invalid_argument;
  const std::uint64_t usecs = *n * mult;  // *n <= 2^32, mult <= 10^6: no 64-bit overflow
  if (usecs > kU32Max) return std::errc::value_too_large;
  return static_cast<std::uint32_t>(usecs);
}

/// libxl's own "<bytes>,<usecs>" (both decimal, nothing else).
Result<VifRate> parse_raw(std::string_view s) {
  auto bytes = take_number(s, std::numeric_limits<std::uint64_t>::max() / 10);
  if (!bytes) return bytes.error();
  if (s.empty() || s.front() != ',') return std::errc::invalid_argument;
  s.remove_prefix(1);
  auto usecs = take_number(s, kU32Max);
  if (!usecs) return usecs.error();
  if (!s.empty() || *usecs == 0) return std::errc::invalid_argument;
  if (*bytes == 0) return std::errc::result_out_of_range;
  return VifRate{*bytes, static_cast<std::uint32_t>(*usecs)};
}

}  // namespace

Result<VifRate> parse_vif_rate(std::string_view text) {
  if (text.find(',') != std::string_view::npos) return parse_raw(text);
  const std::size_t at = text.find('@');
  auto bps = parse_bytes_per_sec(text.substr(0, at));
  if (!bps) return bps.error();
  std::uint32_t usecs = kDefaultRateIntervalUsecs;
  if (at != std::string_view::npos) {
    auto iv = parse_interval_usecs(text.substr(at + 1));
    if (!iv) return iv.error();
    usecs = *iv;
  }
  if (*bps > std::numeric_limits<std::uint64_t>::max() / usecs) return std::errc::value_too_large;
  // xl: bytes per interval = bytes/s * interval / 1 s (rounded down). xl writes a 0 that
  // this rounding makes (1Mb/s@1us -> "0,1"), and netback then never refills the credit:
  // the vif's TX stops for good after its first burst. Refused instead.
  const std::uint64_t per_interval = *bps * usecs / 1'000'000ULL;
  if (per_interval == 0) return std::errc::result_out_of_range;
  return VifRate{per_interval, usecs};
}

std::string vif_rate_error_text(std::error_code ec) {
  if (ec == std::errc::result_out_of_range)
    return "the rate comes to 0 bytes per interval, so the vif's TX would stop for good: raise "
           "the rate or lengthen the interval";
  if (ec == std::errc::value_too_large) return "a number is too large";
  return "rate must be like 10Mb/s@50ms (B/KB/MB/GB or b/Kb/Mb/Gb per second, @N[s|ms|us]) or "
         "<bytes>,<usecs>";
}

std::string format_vif_rate(const VifRate& rate) {
  return std::to_string(rate.bytes_per_interval) + "," + std::to_string(rate.interval_usecs);
}

}  // namespace unetback::toolstack
