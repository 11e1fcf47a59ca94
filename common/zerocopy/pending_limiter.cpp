#include "common/zerocopy/pending_limiter.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <system_error>

namespace unetback::zerocopy {

namespace {

// The slot of an index must not change when the 16-bit index wraps.
static_assert((std::uint32_t{std::numeric_limits<std::uint16_t>::max()} + 1) % kMaxRingSize == 0);
// in_flight() is produced - done in 16 bits: exact only while the window is below 2^16.
static_assert(kMaxRingSize / 4 < std::numeric_limits<std::uint16_t>::max());

bool is_power_of_two(std::uint32_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

std::optional<std::string> config_problem(const LimiterConfig& config) {
  if (config.ring_size < kMinRingSize || config.ring_size > kMaxRingSize ||
      !is_power_of_two(config.ring_size)) {
    return "zerocopy: ring_size " + std::to_string(config.ring_size) +
           " is not a power of two in [" + std::to_string(kMinRingSize) + ", " +
           std::to_string(kMaxRingSize) + "]";
  }
  if (config.max_pending == 0) {
    // A zero limit would copy every packet (or, in stall mode, never send one again); to turn
    // zerocopy off, raise goodcopy_len instead.
    return "zerocopy: max_pending must be at least 1";
  }
  return std::nullopt;
}

const char* decision_name(Decision d) {
  switch (d) {
    case Decision::zerocopy: return "zerocopy";
    case Decision::copy: return "copy";
    case Decision::stall: return "stall";
  }
  return "?";
}

const char* copy_reason_name(CopyReason r) {
  switch (r) {
    case CopyReason::none: return "none";
    case CopyReason::size: return "size";
    case CopyReason::limit: return "limit";
    case CopyReason::errors: return "errors";
  }
  return "?";
}

PendingLimiter::PendingLimiter(const LimiterConfig& config) : config_(config) {
  if (auto problem = config_problem(config)) {
    throw SetupError(*problem);
  }
  // Seed 000: min(VHOST_MAX_PEND, vq->num >> 2). ring_size >= 4 makes this at least 1.
  limit_ = std::min(config_.max_pending, config_.ring_size >> 2);
  mask_ = static_cast<std::uint16_t>(config_.ring_size - 1);
  slots_.assign(config_.ring_size, Slot::free);
}

std::uint32_t PendingLimiter::in_flight() const {
  return static_cast<std::uint16_t>(produced_ - done_);
}

bool PendingLimiter::errors_rare() const {
  // vhost_net_tx_select_zcopy: tx_packets / 64 >= tx_zcopy_err.
  return window_packets_ / kPacketsPerAllowedError >= window_errors_;
}

void PendingLimiter::count_packet() {
  ++stats_.packets;
  // vhost_net_tx_packet: the window restarts, errors included, every 1024 packets, so an old
  // burst of errors does not disable zerocopy for good.
  if (++window_packets_ >= kErrorWindowPackets) {
    window_packets_ = 0;
    window_errors_ = 0;
  }
}

Verdict PendingLimiter::decide(std::size_t packet_len) {
  // A new decision supersedes an unused zerocopy verdict: begin() belongs to the latest one.
  begin_armed_ = false;

  if (!config_.fallback && at_limit()) {
    // Pre-2017 vhost: handle_tx broke out of its loop before even looking at the next
    // descriptor, so every packet waits, whatever its size.
    ++stats_.stalls;
    return {Decision::stall, CopyReason::limit};
  }

  Verdict v{Decision::zerocopy, CopyReason::none};
  if (packet_len < config_.goodcopy_len) {
    v = {Decision::copy, CopyReason::size};
    ++stats_.copied_size;
  } else if (at_limit()) {
    v = {Decision::copy, CopyReason::limit};
    ++stats_.copied_limit;
  } else if (!errors_rare()) {
    v = {Decision::copy, CopyReason::errors};
    ++stats_.copied_errors;
  } else {
    begin_armed_ = true;
  }
  count_packet();
  return v;
}

Result<Token> PendingLimiter::begin() {
  if (!begin_armed_) {
    return std::errc::operation_not_permitted;
  }
  begin_armed_ = false;
  // decide() saw in_flight < limit <= ring_size / 4, so the slot ahead is free.
  Slot& slot = slots_[produced_ & mask_];
  assert(slot == Slot::free);
  slot = Slot::in_flight;
  Token token{produced_};
  ++produced_;
  ++stats_.zerocopy_sent;
  return token;
}

Result<std::uint32_t> PendingLimiter::complete(Token token, bool success) {
  // In flight means done <= index < produced, modularly, and not yet completed.
  const auto offset = static_cast<std::uint16_t>(token.idx_ - done_);
  if (offset >= in_flight() || slots_[token.idx_ & mask_] != Slot::in_flight) {
    return std::errc::invalid_argument;
  }
  slots_[token.idx_ & mask_] = Slot::completed;
  if (success) {
    ++stats_.zerocopy_success;
  } else {
    // Counted now rather than when the done index passes the slot (vhost counts it in
    // vhost_zerocopy_signal_used): the heuristic reacts without waiting for older buffers.
    ++stats_.zerocopy_failed;
    ++window_errors_;
  }

  // vhost_zerocopy_signal_used: done_idx chases upend_idx over completed slots, in order.
  std::uint32_t advanced = 0;
  while (done_ != produced_ && slots_[done_ & mask_] == Slot::completed) {
    slots_[done_ & mask_] = Slot::free;
    ++done_;
    ++advanced;
  }
  return advanced;
}

}  // namespace unetback::zerocopy
