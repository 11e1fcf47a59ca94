// unetback-udpflow's command line, parsed strictly by a pure function (no exceptions, no
// atoi): every number range-checked, every address validated with inet_pton.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace unetback::udpflow {

/// Exit codes (documented in --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< a socket error, or no packet arrived in time
inline constexpr int kExitUsage = 2;

/// The largest UDP payload over IPv4: 65535 - 20 (IPv4 header) - 8 (UDP header).
inline constexpr std::uint32_t kMaxPayload = 65507;
/// The longest run: a day.
inline constexpr double kMaxSeconds = 86400;

/// An IPv4 or IPv6 literal, validated.
struct IpAddress {
  std::string text;
  bool ipv6 = false;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct SendOptions {
  IpAddress to;
  std::uint16_t port = 0;
  std::uint32_t size = 0;            ///< payload bytes, 1..kMaxPayload
  double seconds = 0;                ///< > 0
  std::optional<std::uint64_t> pps;  ///< paced; unset = as fast as possible
  bool json = false;
};

struct RecvOptions {
  std::uint16_t port = 0;
  double seconds = 0;             ///< the counting window
  std::optional<IpAddress> bind;  ///< default 0.0.0.0
  bool from_start = false;        ///< the window starts at once, not at the first packet
  double wait = 30;               ///< seconds to wait for the first packet (not --from-start)
  bool json = false;
};

struct HelpRequested {};
struct UsageError {
  std::string message;
};

using ParseOutcome = std::variant<SendOptions, RecvOptions, HelpRequested, UsageError>;

/// Parses argv[1..]: a mode ("send" or "recv") then its options, "--opt value" or
/// "--opt=value". Every option at most once; required ones checked.
[[nodiscard]] ParseOutcome parse_udpflow_args(std::span<const std::string_view> args);

/// The --help text.
[[nodiscard]] std::string udpflow_usage();

/// "IP:PORT" with an IPv4 literal, or "[IPv6]:PORT"; port 1..65535.
[[nodiscard]] std::optional<std::pair<IpAddress, std::uint16_t>> parse_endpoint(
    std::string_view text);
/// An IPv4 or IPv6 literal (no brackets, no port).
[[nodiscard]] std::optional<IpAddress> parse_ip(std::string_view text);
/// A decimal number of seconds in (0, kMaxSeconds], e.g. "10" or "0.3".
[[nodiscard]] std::optional<double> parse_seconds(std::string_view text);

}  // namespace unetback::udpflow
