// What the ShimLoop's files (shim_loop.cpp, shim_xenbus.cpp, shim_datapath.cpp,
// shim_side_channels.cpp) share: the log helpers, the loop's constants and small readers.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "common/hv/xenstore.hpp"
#include "common/util/log.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace unetback::shim::loop_detail {

using namespace std::chrono_literals;

inline constexpr std::string_view kLog = "netfront-shim";
/// How long a clean disconnect waits for the backend to follow (Closing/Closed).
inline constexpr auto kDisconnectWait = 2000ms;

/// Microsoft's RSS verification key (the one Windows uses unless configured otherwise).
inline constexpr std::array<std::uint8_t, 40> kRssKey{
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

inline void info(const std::string& msg) {
  log::write(log::Level::info, kLog, msg);
}
inline void warn(const std::string& msg) {
  log::write(log::Level::warn, kLog, msg);
}
inline void error(const std::string& msg) {
  log::write(log::Level::error, kLog, msg);
}

/// A node's xenbus state; nullopt when missing, unreadable or not a state.
inline std::optional<xenbus::XenbusState> read_state(hv::XenStore& xs, const std::string& path) {
  auto v = xs.read(path);
  if (!v) return std::nullopt;
  return xenbus::parse_xenbus_state(*v);
}

inline std::string state_text(std::optional<xenbus::XenbusState> s) {
  return s ? std::string(xenbus::state_name(*s)) : std::string("gone");
}

/// A small file's text (the first 64 KiB), or nothing if it cannot be opened.
inline std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(std::size_t{64} * 1024, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace unetback::shim::loop_detail
