// Credit: the guest-TX rate limit of the backend key `rate` = "<bytes>,<usecs>"
// (netback-facts §1.3): `bytes` of credit every `usecs`, capped at max(128 KiB, bytes) so a
// 64 KiB GSO packet still gets through under a tiny rate. Unlimited by default.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace unetback::vif {

class Credit {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::uint64_t kMinBurst = 128 * 1024;

  /// `bytes` == ~0 and `usecs` == 0 mean unlimited.
  void set_rate(std::uint64_t bytes, std::uint64_t usecs, Clock::time_point now) {
    bytes_ = bytes;
    usecs_ = usecs;
    remaining_ = max_burst();
    window_start_ = now;
  }
  [[nodiscard]] bool unlimited() const { return usecs_ == 0; }

  /// Takes `size` bytes of credit if there is enough (refilling first if a window passed);
  /// otherwise returns false and the caller waits until next_refill().
  bool try_take(std::uint64_t size, Clock::time_point now) {
    if (unlimited()) return true;
    if (now >= next_refill()) {
      window_start_ = now;
      remaining_ = std::min(remaining_ + std::min(bytes_, max_burst()), max_burst());
    }
    if (size > remaining_) return false;
    remaining_ -= size;
    return true;
  }
  [[nodiscard]] Clock::time_point next_refill() const {
    return window_start_ + std::chrono::microseconds(usecs_);
  }

 private:
  [[nodiscard]] std::uint64_t max_burst() const { return std::max(kMinBurst, bytes_); }

  std::uint64_t bytes_ = ~std::uint64_t{0};
  std::uint64_t usecs_ = 0;
  std::uint64_t remaining_ = ~std::uint64_t{0};
  Clock::time_point window_start_{};
};

}  // namespace unetback::vif
