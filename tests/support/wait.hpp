// Waiting for a condition in tests: the hang guard every wait is bounded by, and a wait that
// returns as soon as its condition holds. A wait bounds a hang, never a speed: a loaded machine
// (a sanitizer build beside other builds) takes its time.
#pragma once

#include <chrono>
#include <thread>

namespace unetback::test {

/// How long a wait for something that must happen may last before the test calls it a hang.
inline constexpr std::chrono::milliseconds kHangGuard = std::chrono::seconds(30);

/// Polls `done()` every `step` until it holds (true) or `t` passed (false).
template <typename Pred>
bool wait_until(Pred done, std::chrono::milliseconds t = kHangGuard,
                std::chrono::milliseconds step = std::chrono::milliseconds(2)) {
  const auto deadline = std::chrono::steady_clock::now() + t;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace unetback::test
