// The command line of unetback-userhop (pure: no I/O), so the unit tests can reach it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace unetback::userhop {

struct UserhopOptions {
  std::string tap_a;  // first TAP's name
  std::string tap_b;  // second TAP's name
  /// Network namespaces (names under /run/netns, as `ip netns add` makes them) to create each
  /// TAP in; empty: the namespace the program runs in.
  std::string netns_a;
  std::string netns_b;
  /// TUNSETOFFLOAD csum + TSO4 + TSO6 on both TAPs (the default): GSO super-frames travel as
  /// one read and one write, as they would through any vnet_hdr backend.
  bool offloads = true;
  std::optional<std::uint32_t> mtu;
  /// Frames moved per direction before the loop polls again (fairness between directions).
  std::uint32_t budget = 64;
};

/// `--help` was asked for.
struct HelpRequested {};

/// Parses argv[1..]. Returns the options, HelpRequested, or an error message.
[[nodiscard]] std::variant<UserhopOptions, HelpRequested, std::string> parse_userhop_options(
    std::span<const std::string_view> args);

[[nodiscard]] std::string_view userhop_usage();

}  // namespace unetback::userhop
