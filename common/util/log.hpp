// Logging: one line per event to stderr, with a level and a caller-chosen prefix
// (`vif<domid>.<devid>-q<N>` for data-path messages, STYLE rule 15). Messages a guest can
// trigger go through a RateLimit so a hostile frontend cannot flood dom0's logs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

namespace unetback::log {

enum class Level : int { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(Level l);
[[nodiscard]] Level level();
void write(Level l, std::string_view prefix, std::string_view msg);

/// Where written lines go besides stderr: tests install one to count what a guest made the
/// backend log (is it rate-limited?). Called under the write lock, so it must not log.
/// An empty function removes it.
using Sink = std::function<void(Level, std::string_view prefix, std::string_view msg)>;
void set_sink(Sink sink);

/// Allows `burst` messages per `interval`; counts what it suppressed and reports the
/// count with the next message that gets through. Thread-safe and lock-free; at a window
/// boundary racing threads may let a message or two more through (it is a log limiter).
class RateLimit {
 public:
  explicit RateLimit(std::uint32_t burst = 10,
                     std::chrono::milliseconds interval = std::chrono::seconds(5))
      : burst_(burst),
        interval_ns_(std::chrono::nanoseconds(interval).count()),
        window_start_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count()) {}

  /// True if a message may be logged now. `suppressed` receives how many were dropped
  /// since the last message that got through.
  bool allow(std::uint64_t& suppressed);

 private:
  std::uint32_t burst_;
  std::int64_t interval_ns_;
  std::atomic<std::int64_t> window_start_;
  std::atomic<std::uint32_t> in_window_{0};
  std::atomic<std::uint64_t> suppressed_{0};
};

}  // namespace unetback::log
