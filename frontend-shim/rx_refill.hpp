// When netfront re-posts RX buffers. Linux netfront refills the whole ring after every poll;
// virtio-net refilled only once half the ring was free, and seed 002 ("virtio-net: lower min
// ring num_free for efficiency") moved that to half the *budget*: refill as soon as more than
// min(budget, ring_size) / 2 requests are free, so one poll's worth of packets never leaves
// the backend short of buffers (and a refill never has more than a budget's worth of work).
#pragma once

#include <algorithm>
#include <cstdint>

namespace unetback::netfront {

/// Free requests above which a refill is due.
[[nodiscard]] constexpr std::uint32_t rx_refill_threshold(std::uint32_t budget,
                                                          std::uint32_t ring_size) {
  return std::min(budget, ring_size) / 2;
}

/// Seed 002's rule: refill when free > min(budget, ring_size) / 2.
[[nodiscard]] constexpr bool rx_refill_due(std::uint32_t free, std::uint32_t budget,
                                           std::uint32_t ring_size) {
  return free > rx_refill_threshold(budget, ring_size);
}

}  // namespace unetback::netfront
