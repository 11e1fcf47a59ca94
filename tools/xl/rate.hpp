// The vif `rate=` option in xl's syntax, turned into libxl's B:rate value.
//
// xl (libxlu_vif.c) accepts "RATE[@INTERVAL]": RATE matches ^[0-9]+[GMK]?[Bb]/s$ (decimal
// multipliers, lower-case b means bits), INTERVAL matches ^[0-9]+[mu]?s?$ (no suffix or "s"
// means seconds); the interval defaults to 50 ms. libxl then writes
// "<bytes per interval>,<interval usecs>" (libxl_nic.c; Linux netback's xenbus.c reads it).
// We also accept that raw form, so a test or a script can give the backend's value directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/util/result.hpp"

namespace unetback::toolstack {

/// xl's default replenishment interval: 50 ms.
inline constexpr std::uint32_t kDefaultRateIntervalUsecs = 50'000;

struct VifRate {
  std::uint64_t bytes_per_interval = 0;
  std::uint32_t interval_usecs = 0;

  friend bool operator==(const VifRate&, const VifRate&) = default;
};

/// Parses xl's "10Mb/s@50ms" (or libxl's raw "<bytes>,<usecs>"). EINVAL for anything that
/// does not match the grammar or has a zero rate/interval; EOVERFLOW when a number exceeds
/// xl's limits (each number at most UINT32_MAX before its multiplier, the interval at most
/// UINT32_MAX microseconds, bytes per second times interval within 64 bits); ERANGE when the
/// rate comes to less than one byte per interval (xl would write "0,<usecs>", which stops
/// the vif's TX for good).
[[nodiscard]] Result<VifRate> parse_vif_rate(std::string_view text);

/// Why parse_vif_rate refused a value, in words for an operator.
[[nodiscard]] std::string vif_rate_error_text(std::error_code ec);

/// libxl's B:rate value: "<bytes>,<usecs>".
[[nodiscard]] std::string format_vif_rate(const VifRate& rate);

}  // namespace unetback::toolstack
