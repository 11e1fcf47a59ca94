#include "common/util/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "common/util/parse_decimal.hpp"

namespace unetback::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::atomic<bool> g_journal{false};
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

std::optional<Level> parse_level(std::string_view name) {
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn") return Level::warn;
  if (name == "error") return Level::error;
  return std::nullopt;
}

int syslog_priority(Level l) {
  switch (l) {
    case Level::debug: return 7;
    case Level::info: return 6;
    case Level::warn: return 4;
    case Level::error: return 3;
  }
  return 6;
}

std::string format_line(Level l, bool journal, std::string_view stamp, std::string_view prefix,
                        std::string_view msg) {
  std::string line;
  line.reserve(stamp.size() + prefix.size() + msg.size() + 16);
  if (journal) {
    line += '<';
    line += static_cast<char>('0' + syslog_priority(l));
    line += '>';
  } else {
    line += stamp;
    line += ' ';
  }
  std::string level = level_name(l);
  level.resize(5, ' ');
  line += level;
  line += ' ';
  line += prefix;
  if (!prefix.empty()) line += ": ";
  line += msg;
  line += '\n';
  return line;
}

bool journal_stream_matches(std::string_view journal_stream, int fd) {
  const auto colon = journal_stream.find(':');
  if (colon == std::string_view::npos) return false;
  const auto dev = parse_decimal<std::uint64_t>(journal_stream.substr(0, colon));
  const auto ino = parse_decimal<std::uint64_t>(journal_stream.substr(colon + 1));
  struct stat st {};
  if (!dev || !ino || ::fstat(fd, &st) != 0) return false;
  return static_cast<std::uint64_t>(st.st_dev) == *dev &&
         static_cast<std::uint64_t>(st.st_ino) == *ino;
}

bool use_journal_if_connected() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): called once at startup, before any thread.
  const char* env = std::getenv("JOURNAL_STREAM");
  const bool journal = env != nullptr && journal_stream_matches(env, STDERR_FILENO);
  g_journal.store(journal, std::memory_order_relaxed);
  return journal;
}

void write(Level l, std::string_view prefix, std::string_view msg) {
  if (static_cast<int>(l) < g_level.load(std::memory_order_relaxed)) return;
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  ::gmtime_r(&ts.tv_sec, &tm);
  char stamp[32];
  const std::size_t n = std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03ld", ts.tv_nsec / 1000000);
  const std::string line =
      format_line(l, g_journal.load(std::memory_order_relaxed), stamp, prefix, msg);
  const std::lock_guard lock(g_write_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
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

bool write_limited(RateLimit& limit, Level l, std::string_view prefix, std::string_view msg) {
  std::uint64_t suppressed = 0;
  if (!limit.allow(suppressed)) return false;
  if (suppressed == 0) {
    write(l, prefix, msg);
  } else {
    write(l, prefix, std::string(msg) + " (" + std::to_string(suppressed) + " suppressed)");
  }
  return true;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace unetback::log
