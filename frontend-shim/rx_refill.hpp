// When netfront re-posts RX buffers. Linux netfront refills the whole ring after every poll;
// virtio-net refilled only once half the ring was free, and seed 002 ("virtio-net: lower min
// ring num_free for efficiency") moved that to half the *budget*: refill as soon as more than
// min(budget, ring_size) / 2 requests are free, so one poll's worth of packets never leaves
// the backend short of buffers (and a refill never has more than a budget's worth of work).
//
// The old rule stays selectable (RxRefillRule::half_ring, netfront-shim --rx-refill
// half-ring) so the seed's experiment can compare both on the same path (issue 7).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

namespace unetback::netfront {

enum class RxRefillRule : std::uint8_t {
  early,      ///< seed 002: free > min(budget, ring_size) / 2 (the default)
  half_ring,  ///< the old virtio-net rule: free > ring_size / 2
};

/// Free requests above which a refill is due (seed 002's rule).
[[nodiscard]] constexpr std::uint32_t rx_refill_threshold(std::uint32_t budget,
                                                          std::uint32_t ring_size) {
  return std::min(budget, ring_size) / 2;
}

/// Free requests above which a refill is due under `rule`.
[[nodiscard]] constexpr std::uint32_t rx_refill_threshold(RxRefillRule rule, std::uint32_t budget,
                                                          std::uint32_t ring_size) {
  return rule == RxRefillRule::half_ring ? ring_size / 2 : rx_refill_threshold(budget, ring_size);
}

/// Seed 002's rule: refill when free > min(budget, ring_size) / 2.
[[nodiscard]] constexpr bool rx_refill_due(std::uint32_t free, std::uint32_t budget,
                                           std::uint32_t ring_size) {
  return free > rx_refill_threshold(budget, ring_size);
}

/// Refill when free > rx_refill_threshold(rule, budget, ring_size).
[[nodiscard]] constexpr bool rx_refill_due(RxRefillRule rule, std::uint32_t free,
                                           std::uint32_t budget, std::uint32_t ring_size) {
  return free > rx_refill_threshold(rule, budget, ring_size);
}

/// "early" / "half-ring", as the shim's --rx-refill spells them.
[[nodiscard]] constexpr std::string_view rx_refill_rule_name(RxRefillRule rule) {
  return rule == RxRefillRule::half_ring ? "half-ring" : "early";
}

/// The inverse of rx_refill_rule_name (exact spelling only).
[[nodiscard]] constexpr std::optional<RxRefillRule> parse_rx_refill_rule(std::string_view name) {
  if (name == "early") return RxRefillRule::early;
  if (name == "half-ring") return RxRefillRule::half_ring;
  return std::nullopt;
}

}  // namespace unetback::netfront
