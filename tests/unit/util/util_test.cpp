// Utilities: fd ownership, Result, rate-limited logging.
#include <chrono>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/util/coarse_clock.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback {
namespace {

bool fd_is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

// journald reads a "<N>" prefix as the line's priority (sd-daemon(3)), so that
// `journalctl -p warning` shows warnings and errors but not info.
TEST(Log, JournalLinesCarryTheSyslogPriorityOfTheirLevel) {
  using log::Level;
  EXPECT_EQ(log::format_line(Level::debug, true, "12:00:00.000", "vif5.0-q0", "m"),
            "<7>debug vif5.0-q0: m\n");
  EXPECT_EQ(log::format_line(Level::info, true, "12:00:00.000", "unetbackd", "serving"),
            "<6>info  unetbackd: serving\n");
  EXPECT_EQ(log::format_line(Level::warn, true, "12:00:00.000", "unetbackd", "w"),
            "<4>warn  unetbackd: w\n");
  EXPECT_EQ(log::format_line(Level::error, true, "12:00:00.000", "", "e"), "<3>error e\n");
}

TEST(Log, PlainLinesHaveTheTimestampAndNoPriorityPrefix) {
  EXPECT_EQ(log::format_line(log::Level::warn, false, "12:34:56.789", "unetbackd", "w"),
            "12:34:56.789 warn  unetbackd: w\n");
}

TEST(Log, JournalStreamMatchesOnlyTheFileItNames) {
  char path[] = "/tmp/unetback-log-XXXXXX";
  const UniqueFd fd(::mkstemp(path));
  ASSERT_TRUE(fd);
  ::unlink(path);
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  const std::string dev = std::to_string(st.st_dev), ino = std::to_string(st.st_ino);
  EXPECT_TRUE(log::journal_stream_matches(dev + ":" + ino, fd.get()));
  // Another file (a service's stderr redirected by a child, say): plain lines.
  EXPECT_FALSE(log::journal_stream_matches(dev + ":" + std::to_string(st.st_ino + 1), fd.get()));
  EXPECT_FALSE(log::journal_stream_matches(std::to_string(st.st_dev + 1) + ":" + ino, fd.get()));
  for (const std::string& bad : {std::string(), dev, ":" + ino, dev + ":", dev + ":" + ino + ":1",
                                 "x:" + ino, dev + ": " + ino})
    EXPECT_FALSE(log::journal_stream_matches(bad, fd.get())) << bad;
  EXPECT_FALSE(log::journal_stream_matches(dev + ":" + ino, -1));
}

// The queues stamp packets with the coarse clock and compare the stamps with deadlines that
// may come from steady_clock: both must be one time line, the coarse one behind by a tick.
TEST(CoarseClock, IsSteadyClocksTimeLineAtMostATickBehind) {
  for (int i = 0; i < 1000; ++i) {
    const auto before = std::chrono::steady_clock::now();
    const auto coarse = coarse_now();
    const auto after = std::chrono::steady_clock::now();
    ASSERT_LE(coarse, after) << "the coarse clock never runs ahead";
    // A tick is 1-10 ms (CONFIG_HZ 1000-100). `before` was read first, so a preempted test
    // thread only makes `coarse` later: the bound tells another epoch apart, not a slow tick.
    ASSERT_GT(coarse, before - std::chrono::seconds(30)) << "the same epoch as CLOCK_MONOTONIC";
  }
}

TEST(UniqueFd, ClosesOnDestruction) {
  int raw = -1;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(fd_is_open(raw));
  }
  EXPECT_FALSE(fd_is_open(raw));
}

TEST(UniqueFd, MoveTransfersOwnershipAndReleaseGivesItUp) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(b.get(), raw);
  const int released = b.release();
  EXPECT_FALSE(b.valid());
  EXPECT_TRUE(fd_is_open(released));
  ::close(released);
}

TEST(UniqueFd, ResetClosesThePreviousDescriptor) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int first = a.get();
  a.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_NE(a.get(), -1);
  if (a.get() != first) {
    EXPECT_FALSE(fd_is_open(first));
  }
}

Result<int> half(int v) {
  if (v % 2 != 0) return std::errc::invalid_argument;
  return v / 2;
}

// Issue 15 #1: the descriptors a guest's connect may not take, and the spares an acceptor
// borrows under EMFILE.
TEST(FdReserve, RefusesWhatWouldLeaveLessThanTheFloorAndLendsItsSpares) {
  FdReserve reserve(2, 8);
  EXPECT_EQ(reserve.spares_held(), 2U);
  const std::size_t free = free_fds();
  ASSERT_GT(free, 20U);
  EXPECT_TRUE(reserve.allows(free - 8));
  EXPECT_FALSE(reserve.allows(free - 7));
  // Lending a spare frees one descriptor; restoring takes it back.
  EXPECT_TRUE(reserve.release_spare());
  EXPECT_EQ(free_fds(), free + 1);
  EXPECT_EQ(reserve.spares_held(), 1U);
  reserve.restore_spares();
  EXPECT_EQ(free_fds(), free);
  EXPECT_EQ(reserve.spares_held(), 2U);
}

TEST(Result, CarriesAValueOrAnError) {
  auto ok = half(8);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 4);
  EXPECT_FALSE(ok.error());
  auto bad = half(3);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error(), std::errc::invalid_argument);
  EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Result, ErrnoCodesCompareWithErrc) {
  EXPECT_EQ(errno_code(ENOENT), std::errc::no_such_file_or_directory);
  EXPECT_EQ(errno_code(EAGAIN), std::errc::resource_unavailable_try_again);
}

TEST(RateLimit, AllowsABurstThenSuppressesAndReportsTheCount) {
  log::RateLimit rl(3, std::chrono::hours(1));
  std::uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(rl.allow(suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(rl.allow(suppressed));
}

// The limiter's window is its own clock's: a run of calls is in one window only if it took
// less than the window from the limiter's construction. A run the scheduler stretched past the
// window proves nothing and is made again with a fresh limiter; sleeping a whole window after
// the last call ends that window however slow the machine.
constexpr std::chrono::milliseconds kWindow{50};

/// Runs `calls(rl)` on fresh limiters (burst 2, kWindow) until one run fits in its first
/// window; returns that limiter's run through `done(rl)`.
template <typename Calls, typename Done>
void within_one_window(Calls calls, Done done) {
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    log::RateLimit rl(2, kWindow);
    auto got = calls(rl);
    if (std::chrono::steady_clock::now() - t0 >= kWindow) continue;  // stretched: again
    done(rl, got);
    return;
  }
}

TEST(RateLimit, NewWindowLetsMessagesThroughWithTheSuppressedCount) {
  within_one_window(
      [](log::RateLimit& rl) {
        std::uint64_t suppressed = 0;
        int allowed = 0;
        for (int i = 0; i < 9; ++i) allowed += rl.allow(suppressed) ? 1 : 0;
        return allowed;
      },
      [](log::RateLimit& rl, int allowed) {
        EXPECT_EQ(allowed, 2) << "the burst, then 7 suppressed";
        std::this_thread::sleep_for(kWindow);  // the window ends by the clock
        std::uint64_t suppressed = 0;
        ASSERT_TRUE(rl.allow(suppressed));
        EXPECT_EQ(suppressed, 7u);
      });
}

TEST(RateLimit, AGuestFloodFromManyThreadsStaysWithinTheBurst) {
  log::RateLimit rl(10, std::chrono::hours(1));
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::uint64_t s = 0;
      for (int i = 0; i < 10000; ++i)
        if (rl.allow(s)) allowed.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 10);
}

TEST(RateLimit, WriteLimitedWritesTheBurstThenNamesWhatItHeldBack) {
  std::vector<std::string> lines;
  log::set_sink(
      [&](log::Level, std::string_view, std::string_view msg) { lines.emplace(lines.end(), msg); });
  int written = 0;
  within_one_window(
      [&](log::RateLimit& rl) {
        lines.clear();
        int n = 0;
        for (int i = 0; i < 6; ++i)
          n += log::write_limited(rl, log::Level::error, "vif1.0", "bad request") ? 1 : 0;
        return n;
      },
      [&](log::RateLimit& rl, int n) {
        std::this_thread::sleep_for(kWindow);  // the window ends by the clock
        written = n + (log::write_limited(rl, log::Level::error, "vif1.0", "bad request") ? 1 : 0);
      });
  log::set_sink(nullptr);
  EXPECT_EQ(written, 3);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "bad request");
  EXPECT_EQ(lines[2], "bad request (4 suppressed)");
}

TEST(Result, CarriesAnErrorTypeOtherThanAnErrorCode) {
  struct Refusal {
    std::string key;
  };
  const Result<int, Refusal> bad = Refusal{"mtu"};
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().key, "mtu");
  const Result<int, Refusal> good = 7;
  ASSERT_TRUE(good);
  EXPECT_EQ(*good, 7);
}

}  // namespace
}  // namespace unetback
