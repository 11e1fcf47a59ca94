#include "common/util/log.hpp"

#include <cstdio>
#include <ctime>
#include <mutex>
#include <utility>

namespace unetback::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::mutex g_write_mutex;
Sink g_sink;  // guarded by g_write_mutex

const char* level_name(Level l) {
  switch (l) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warn";
    case Level::error: return "error";
  }
  return "?";
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void set_level(Level l) {
  g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}

Level level() {
  return static_cast<Level>(g_level.load(std::memory_order_relaxed));
}

void set_sink(Sink sink) {
  const std::lock_guard lock(g_write_mutex);
  g_sink = std::move(sink);
}

void write(Level l, std::string_view prefix, std::string_view msg) {
  if (static_cast<int>(l) < g_level.load(std::memory_order_relaxed)) return;
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  ::gmtime_r(&ts.tv_sec, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  const std::lock_guard lock(g_write_mutex);
  std::fprintf(stderr, "%s.%03ld %-5s %.*s%s%.*s\n", stamp, ts.tv_nsec / 1000000, level_name(l),
               static_cast<int>(prefix.size()), prefix.data(), prefix.empty() ? "" : ": ",
               static_cast<int>(msg.size()), msg.data());
  if (g_sink) g_sink(l, prefix, msg);
}

bool RateLimit::allow(std::uint64_t& suppressed) {
  const std::int64_t now = now_ns();
  std::int64_t start = window_start_.load(std::memory_order_relaxed);
  if (now - start >= interval_ns_ &&
      window_start_.compare_exchange_strong(start, now, std::memory_order_relaxed)) {
    in_window_.store(0, std::memory_order_relaxed);
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) < burst_) {
    suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace unetback::log
