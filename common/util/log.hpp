// Logging: one line per event to stderr, with a level and a caller-chosen prefix
// (`vif<domid>.<devid>-q<N>` for data-path messages; docs/design.md, "Conventions"). Messages
// a guest can trigger go through a RateLimit so a hostile frontend cannot flood dom0's logs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace unetback::log {

enum class Level : int { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(Level l);
[[nodiscard]] Level level();
void write(Level l, std::string_view prefix, std::string_view msg);
/// A value from outside (xenstore, a tunable) made fit for a log line: control characters and
/// other bytes outside printable ASCII become '?', and at most 64 bytes are kept ("..." after).
[[nodiscard]] std::string printable(std::string_view s);
/// The level a --log-level value names ("debug", "info", "warn", "error"), or nothing.
[[nodiscard]] std::optional<Level> parse_level(std::string_view name);

/// The syslog priority of a level, as journald reads it from a `<N>` line prefix
/// (sd-daemon(3)): debug 7, info 6, warn 4 (LOG_WARNING), error 3 (LOG_ERR).
[[nodiscard]] int syslog_priority(Level l);

/// One line as write() puts it on stderr, newline included: "HH:MM:SS.mmm level prefix: msg",
/// or for the journal "<N>level prefix: msg" (journald stamps each line itself and files it
/// under priority N, so `journalctl -p warning` finds the warnings).
[[nodiscard]] std::string format_line(Level l, bool journal, std::string_view stamp,
                                      std::string_view prefix, std::string_view msg);

/// True if `journal_stream` (systemd's $JOURNAL_STREAM, "<st_dev>:<st_ino>" in decimal) names
/// the file open on `fd`. systemd sets it for a service whose stderr is the journal; a child
/// whose stderr was redirected elsewhere inherits the variable but not the match.
[[nodiscard]] bool journal_stream_matches(std::string_view journal_stream, int fd);

/// Switches write() to the journal form if stderr is the journal ($JOURNAL_STREAM matches
/// fd 2), else leaves plain lines. Returns whether it switched.
bool use_journal_if_connected();

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

/// Writes `msg` when `limit` allows a message now, with " (N suppressed)" when it held some
/// back since the last one; true if it wrote. For every line a guest, a client or any other
/// party outside the daemon can repeat at will.
bool write_limited(RateLimit& limit, Level l, std::string_view prefix, std::string_view msg);

}  // namespace unetback::log
