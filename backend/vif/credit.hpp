// Credit: the guest-TX rate limit of the backend key `rate` = "<bytes>,<usecs>"
// (Linux netback's netback.c): `bytes` of credit every `usecs`, capped at max(128 KiB, bytes) so a
// 64 KiB GSO packet still gets through under a tiny rate: a packet larger than one interval's
// credit waits until enough intervals have added up (netback's tx_add_credit burst). Unlimited
// by default.
//
// A refused retry costs the event loop a wakeup, so the caller is told when the head packet's
// credit will be there (retry_at), and never sooner than kMinRetry: netback's credit timer
// counts whole jiffies (msecs_to_jiffies(usecs / 1000), 1 to 10 ms), and a 1 µs interval must
// not turn into a timer that fires every microsecond (issue 15). So that this granularity does
// not cap a fast rate with a tiny interval, the burst also holds one kMinRetry's worth.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace unetback::vif {

class Credit {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::uint64_t kMinBurst = 128 * 1024;
  /// The finest retry granularity, whatever the interval.
  static constexpr std::chrono::microseconds kMinRetry{1000};
  /// Longer intervals are clamped to this (xl's own limit, UINT32_MAX µs, about 71 minutes),
  /// so no time arithmetic below can overflow.
  static constexpr std::uint64_t kMaxIntervalUsecs = 0xffff'ffffULL;

  /// `bytes` == ~0 and `usecs` == 0 mean unlimited. So does `bytes` == 0: such a rate would
  /// never refill (the parsers refuse it; this keeps a stray zero from stopping TX for good).
  void set_rate(std::uint64_t bytes, std::uint64_t usecs, Clock::time_point now) {
    if (bytes == 0) {
      bytes = ~std::uint64_t{0};
      usecs = 0;
    }
    bytes_ = bytes;
    usecs_ = std::min(usecs, kMaxIntervalUsecs);
    max_burst_ = burst_for(bytes_, usecs_);
    remaining_ = max_burst();
    window_start_ = now;
  }
  [[nodiscard]] bool unlimited() const { return usecs_ == 0; }

  /// Takes `size` bytes of credit if there is enough (after adding the credit of every
  /// interval that passed); otherwise returns false and the caller waits until retry_at().
  bool try_take(std::uint64_t size, Clock::time_point now) {
    if (unlimited()) return true;
    refill(now);
    if (size <= remaining_) {
      remaining_ -= size;
      return true;
    }
    // More than a full burst can ever hold (no netif packet is: 64 KiB < 128 KiB): it goes on
    // a full bucket, or it would wait for ever.
    if (size > max_burst() && remaining_ == max_burst()) {
      remaining_ = 0;
      return true;
    }
    return false;
  }

  /// After a refused try_take(size, now): the first time at which try_take(size) succeeds,
  /// but no sooner than now + kMinRetry.
  [[nodiscard]] Clock::time_point retry_at(std::uint64_t size, Clock::time_point now) const {
    const std::uint64_t want = std::min(size, max_burst());
    std::uint64_t windows = 1;
    if (want > remaining_) {
      const std::uint64_t missing = want - remaining_;  // <= max_burst()
      windows = missing / bytes_ + (missing % bytes_ != 0 ? 1 : 0);
    }
    // windows <= ceil(max_burst / bytes_) <= 128 Ki + 1000 (bytes_ >= 1), usecs_ <= 2^32:
    // under 2^50 µs, well inside steady_clock's range.
    const Clock::time_point at = window_start_ + interval() * static_cast<std::int64_t>(windows);
    return std::max(at, now + kMinRetry);
  }

 private:
  [[nodiscard]] std::uint64_t max_burst() const { return max_burst_; }
  /// max(128 KiB, bytes, the credit of one kMinRetry), saturating.
  [[nodiscard]] static std::uint64_t burst_for(std::uint64_t bytes, std::uint64_t usecs) {
    const auto retry = static_cast<std::uint64_t>(kMinRetry.count());
    const std::uint64_t per_retry = usecs == 0 ? 1 : retry / usecs + (retry % usecs != 0 ? 1 : 0);
    const std::uint64_t b =
        bytes > ~std::uint64_t{0} / per_retry ? ~std::uint64_t{0} : bytes * per_retry;
    return std::max(kMinBurst, b);
  }
  [[nodiscard]] std::chrono::microseconds interval() const {
    return std::chrono::microseconds(static_cast<std::int64_t>(usecs_));
  }

  /// Adds `bytes_` for each whole interval since window_start_ (capped at the burst) and
  /// moves the window on by those intervals.
  void refill(Clock::time_point now) {
    if (now < window_start_ + interval()) return;
    const auto n = static_cast<std::uint64_t>((now - window_start_) / interval());  // >= 1
    window_start_ += interval() * static_cast<std::int64_t>(n);
    const std::uint64_t room = max_burst() - remaining_;
    const std::uint64_t windows_to_fill = room / bytes_ + (room % bytes_ != 0 ? 1 : 0);
    // n < windows_to_fill makes n * bytes_ < room: no overflow, never past the burst.
    remaining_ = n >= windows_to_fill ? max_burst() : remaining_ + n * bytes_;
  }

  std::uint64_t bytes_ = ~std::uint64_t{0};
  std::uint64_t usecs_ = 0;
  std::uint64_t max_burst_ = ~std::uint64_t{0};
  std::uint64_t remaining_ = ~std::uint64_t{0};
  Clock::time_point window_start_{};
};

}  // namespace unetback::vif
