// Waiting for an event-channel event with a bound, for tests.
#pragma once

#include <chrono>
#include <optional>
#include <poll.h>

#include "common/hv/event_channel.hpp"

namespace unetback::test {

/// The next pending port of `ch` (masked now), or nullopt if none arrives within `timeout`.
inline std::optional<Port> wait_event(hv::EventChannel& ch, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto p = ch.pending();
    if (p && *p) return **p;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{ch.fd(), POLLIN, 0};
    (void)::poll(&pfd, 1, static_cast<int>(left.count()));
  }
}

/// Whether ch's fd is readable right now.
inline bool readable(const hv::EventChannel& ch) {
  pollfd pfd{ch.fd(), POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 1;
}

}  // namespace unetback::test
