// The guest-TX credit of B:rate (Linux netback's netback.c), on a simulated clock: the scheduler is
// told when to retry, and every retry it is told of succeeds, never sooner than 1 ms.
#include "backend/vif/credit.hpp"

#include <gtest/gtest.h>

namespace unetback::vif {
namespace {

using namespace std::chrono_literals;
using Clock = Credit::Clock;

constexpr Clock::time_point kT0 = Clock::time_point{} + 1000s;

/// Sends `size`-byte packets for `span` of simulated time, sleeping until retry_at() after
/// each refusal, as VifQueue does. Returns the bytes sent; counts refusals and checks each
/// retry's wait.
struct SendRun {
  std::uint64_t bytes = 0;
  std::uint64_t refusals = 0;
  std::uint64_t failed_retries = 0;  // retries at retry_at() that were refused again
  Clock::duration shortest_wait = Clock::duration::max();
};
SendRun send_for(Credit& c, std::uint64_t size, Clock::duration span) {
  SendRun r;
  Clock::time_point now = kT0;
  bool retrying = false;
  while (now < kT0 + span) {
    if (c.try_take(size, now)) {
      r.bytes += size;
      retrying = false;
      continue;
    }
    if (retrying) ++r.failed_retries;
    ++r.refusals;
    const auto at = c.retry_at(size, now);
    r.shortest_wait = std::min(r.shortest_wait, at - now);
    now = at;
    retrying = true;
  }
  return r;
}

TEST(Credit, UnlimitedByDefaultAndForZeroBytes) {
  Credit c;
  EXPECT_TRUE(c.unlimited());
  EXPECT_TRUE(c.try_take(1u << 30, kT0));
  // A zero rate would never refill: taken as unlimited, never as "stop for good".
  c.set_rate(0, 1, kT0);
  EXPECT_TRUE(c.unlimited());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(c.try_take(65535, kT0));
}

TEST(Credit, FirstBurstThenTheConfiguredRate) {
  Credit c;
  c.set_rate(100'000, 100'000, kT0);  // 100 kB every 100 ms: 1 MB/s
  const SendRun r = send_for(c, 1000, 2s);
  // 128 KiB at once, then 1 MB/s for 2 s (whole intervals only).
  EXPECT_GE(r.bytes, 2'000'000u);
  EXPECT_LE(r.bytes, 128u * 1024 + 2'000'000u + 1000);
  EXPECT_EQ(r.failed_retries, 0u);
}

TEST(Credit, PacketBiggerThanTheIntervalsCreditIsSentOnceEnoughIntervalsAddUp) {
  Credit c;
  c.set_rate(1000, 1000, kT0);                              // 1000 bytes a millisecond
  ASSERT_TRUE(c.try_take(std::uint64_t{128} * 1024, kT0));  // the burst is spent
  // 64 KiB: 66 intervals' worth. Refused now, told to come back when 66 have passed.
  ASSERT_FALSE(c.try_take(65536, kT0));
  const auto at = c.retry_at(65536, kT0);
  EXPECT_EQ(at, kT0 + 66ms);
  EXPECT_FALSE(c.try_take(65536, at - 1ms));
  EXPECT_TRUE(c.try_take(65536, at));
}

TEST(Credit, PacketBiggerThanTheBurstGoesOnAFullBucket) {
  // No netif packet exceeds 64 KiB, but a size above the burst must not wait for ever.
  Credit c;
  c.set_rate(1000, 1000, kT0);
  ASSERT_TRUE(c.try_take(1, kT0));
  ASSERT_FALSE(c.try_take(200'000, kT0));
  const auto at = c.retry_at(200'000, kT0);
  EXPECT_TRUE(c.try_take(200'000, at));
}

TEST(Credit, RetriesAreNeverSoonerThanOneMillisecondAndAlwaysSucceed) {
  // "1,1" (1 byte every µs): the retry comes when a 1400-byte packet's credit is there,
  // 1.4 ms on, not 1 µs on; "0,1"-like tiny credits and tiny intervals alike.
  for (const auto& [bytes, usecs] : {std::pair<std::uint64_t, std::uint64_t>{1, 1},
                                     {1, 1000},
                                     {10, 1},
                                     {1400, 1},
                                     {2000, 1},
                                     {100'000, 50'000}}) {
    SCOPED_TRACE(std::to_string(bytes) + "," + std::to_string(usecs));
    Credit c;
    c.set_rate(bytes, usecs, kT0);
    const SendRun r = send_for(c, 1400, 1s);
    EXPECT_GT(r.refusals, 0u);
    EXPECT_GE(r.shortest_wait, Credit::kMinRetry);
    EXPECT_EQ(r.failed_retries, 0u) << "a retry was armed that could not succeed";
    // The rate holds over the second, whatever the granularity: at most a burst (here at
    // most 128 KiB or 1 ms of credit) plus the rate times 1 s, at least the rate.
    const double per_sec = static_cast<double>(bytes) * 1e6 / static_cast<double>(usecs);
    EXPECT_LE(static_cast<double>(r.bytes),
              std::max(128.0 * 1024, per_sec / 1000) + per_sec + 1400);
    EXPECT_GE(static_cast<double>(r.bytes), per_sec * 0.99 - 1400);
  }
}

TEST(Credit, LongIdlePeriodsRefillOnlyUpToTheBurst) {
  Credit c;
  c.set_rate(1, 1, kT0);
  ASSERT_TRUE(c.try_take(std::uint64_t{128} * 1024, kT0));
  // An hour idle: the credit is the burst again, not an hour's worth.
  const auto later = kT0 + 3600s;
  EXPECT_TRUE(c.try_take(std::uint64_t{128} * 1024, later));
  EXPECT_FALSE(c.try_take(1400, later));
}

TEST(Credit, HugeIntervalsAndRatesDoNotOverflow) {
  Credit c;
  c.set_rate(~std::uint64_t{0} - 1, ~std::uint64_t{0}, kT0);  // clamped to 71 minutes
  ASSERT_TRUE(c.try_take(~std::uint64_t{0} - 1, kT0));
  ASSERT_FALSE(c.try_take(1, kT0));
  const auto at = c.retry_at(1, kT0);
  EXPECT_EQ(at, kT0 + std::chrono::microseconds(Credit::kMaxIntervalUsecs));
  EXPECT_TRUE(c.try_take(1, at));
}

}  // namespace
}  // namespace unetback::vif
