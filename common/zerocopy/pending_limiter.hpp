// PendingLimiter: decides, per packet, whether a TX packet is sent zerocopy (grant-mapped and
// held until delivery) or copied, and tracks the zerocopy buffers still in flight.
//
// The policy is vhost_net's (drivers/vhost/net.c after "vhost_net: do not stall on zerocopy
// depletion", 2017, seed 000): zerocopy only when
//   1. the packet is at least `goodcopy_len` bytes (VHOST_GOODCOPY_LEN, 256): below that a copy
//      is cheaper than pinning pages and waiting for a completion;
//   2. the zerocopy buffers in flight stay within `min(max_pending, ring_size / 4)`: buffers held
//      until delivery also hold their ring slots, and with more than a quarter of the ring pinned
//      a slow consumer of the zerocopy flow starts to starve every other flow of the queue.
//      The limit is a hard cap: a packet goes zerocopy only if `in_flight + 1 <= limit`, i.e.
//      "in flight after this packet > limit" means copy. (vhost_exceeds_maxpend compares the
//      count *before* the packet with `>`, which lets limit + 1 buffers be in flight; we keep
//      the cap exact so callers can size per-queue resources by limit());
//   3. zerocopy errors stay rare: `packets / 64 >= errors` over a window of 1024 packets
//      (vhost_net_tx_select_zcopy + vhost_net_tx_packet).
// Otherwise the packet is copied. It is never stalled: before the patch vhost stopped TX when the
// pending limit was hit, which held up the small (copied) flows behind the zerocopy ones. That
// old behaviour is kept behind `fallback = false` so benchmarks can compare the two.
//
// Threading: one PendingLimiter per queue, used from that queue's thread only. It is not
// thread-safe; completions must be marshalled onto the queue's thread (as Linux netback pushes
// its zerocopy callbacks onto a dealloc ring for its NAPI thread) before calling complete().
//
// Pure: no syscalls, no allocation after construction (the slot table is preallocated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.hpp"

namespace unetback::zerocopy {

/// vhost's VHOST_GOODCOPY_LEN: packets shorter than this are always copied.
inline constexpr std::uint32_t kDefaultGoodcopyLen = 256;
/// vhost's VHOST_MAX_PEND: the cap on zerocopy buffers in flight, whatever the ring size.
inline constexpr std::uint32_t kDefaultMaxPending = 128;
/// Smallest and largest accepted ring sizes (a netif ring on one 4 KiB page has 256 slots;
/// multi-page rings go up to 1024, like a virtqueue's usual maximum).
inline constexpr std::uint32_t kMinRingSize = 4;
inline constexpr std::uint32_t kMaxRingSize = 1024;
/// The error heuristic's window: both its counters restart every this many packets.
inline constexpr std::uint32_t kErrorWindowPackets = 1024;
/// At most one zerocopy error per this many packets of the window keeps zerocopy enabled.
inline constexpr std::uint32_t kPacketsPerAllowedError = 64;

struct LimiterConfig {
  std::uint32_t goodcopy_len = kDefaultGoodcopyLen;
  std::uint32_t max_pending = kDefaultMaxPending;  ///< >= 1
  std::uint32_t ring_size = 256;                   ///< power of two in [4, 1024]
  /// true: copy when the pending limit is hit (seed 000). false: stall (pre-2017 vhost).
  bool fallback = true;
};

/// Why `config` is invalid, or nothing if it is valid. Lets a tunable watcher reject a bad value
/// with a logged reason (docs/operator-guide.md, "Tunables") without catching exceptions.
[[nodiscard]] std::optional<std::string> config_problem(const LimiterConfig& config);

enum class Decision : std::uint8_t {
  zerocopy,  ///< map the packet; call begin() and later complete()
  copy,      ///< copy the packet now; `reason` says why
  stall,     ///< (fallback = false only) do not take the packet now; retry after a completion
};

enum class CopyReason : std::uint8_t {
  none,    ///< zerocopy
  size,    ///< shorter than goodcopy_len
  limit,   ///< in-flight zerocopy buffers at the limit (also the reason of a stall)
  errors,  ///< too many zerocopy errors in the current window
};

[[nodiscard]] const char* decision_name(Decision d);
[[nodiscard]] const char* copy_reason_name(CopyReason r);

struct Verdict {
  Decision decision;
  CopyReason reason;
  friend bool operator==(const Verdict&, const Verdict&) = default;
};

/// Monotonic counters since construction, for ethtool-like stats (summed over queues on read).
struct Stats {
  std::uint64_t packets = 0;           ///< decisions that took the packet (not stalls)
  std::uint64_t zerocopy_sent = 0;     ///< begin() calls: buffers put in flight
  std::uint64_t zerocopy_success = 0;  ///< complete(…, true): delivered without a copy
  std::uint64_t zerocopy_failed = 0;   ///< complete(…, false): counted by the error rule
  std::uint64_t copied_size = 0;
  std::uint64_t copied_limit = 0;
  std::uint64_t copied_errors = 0;
  std::uint64_t stalls = 0;  ///< decisions that returned `stall`
};

/// Names one zerocopy buffer in flight. Obtained from begin(), given back to complete() once.
class Token {
 public:
  /// The buffer's free-running 16-bit producer index (slot = index % ring_size); it wraps.
  [[nodiscard]] std::uint16_t index() const { return idx_; }
  friend bool operator==(Token, Token) = default;

 private:
  friend class PendingLimiter;
  explicit Token(std::uint16_t idx) : idx_(idx) {}
  std::uint16_t idx_;
};

class PendingLimiter {
 public:
  /// Throws SetupError (with config_problem()'s text) if `config` is invalid. Allocates the
  /// slot table here, once.
  explicit PendingLimiter(const LimiterConfig& config);

  /// The decision for the next packet of `packet_len` bytes. Checks, in this order: size, the
  /// pending limit, the error rule; the first that fails gives the copy reason. In stall mode
  /// the limit is checked first and stalls *every* packet, small ones included: the old vhost
  /// stopped reading the ring altogether (head-of-line blocking, seed 000). A stall does not
  /// count the packet (it will be decided again); every other verdict counts it in the error
  /// window.
  Verdict decide(std::size_t packet_len);

  /// Puts one zerocopy buffer in flight. Valid once after each `zerocopy` verdict;
  /// otherwise std::errc::operation_not_permitted (and nothing changes).
  [[nodiscard]] Result<Token> begin();

  /// Reports that the buffer of `token` is no longer used (delivered: success = true; or
  /// dropped/failed: success = false, which counts as an error for the error rule). Completions
  /// may come in any order; the done index only moves over a contiguous run of completed
  /// slots, so a buffer still in flight keeps every later one counted as in flight (vhost's
  /// done_idx). Returns how many slots the done index advanced. std::errc::invalid_argument
  /// for a token that is not in flight (never issued, or already completed).
  [[nodiscard]] Result<std::uint32_t> complete(Token token, bool success);

  /// Zerocopy buffers begun and not yet passed by the done index: produced - done, modular.
  /// Never more than limit().
  [[nodiscard]] std::uint32_t in_flight() const;
  /// min(max_pending, ring_size / 4).
  [[nodiscard]] std::uint32_t limit() const { return limit_; }
  [[nodiscard]] const LimiterConfig& config() const { return config_; }
  [[nodiscard]] Stats stats() const { return stats_; }

 private:
  enum class Slot : std::uint8_t { free, in_flight, completed };

  [[nodiscard]] bool at_limit() const { return in_flight() >= limit_; }
  [[nodiscard]] bool errors_rare() const;
  void count_packet();

  LimiterConfig config_;
  std::uint32_t limit_;
  std::uint16_t mask_;
  // Free-running 16-bit indices, like vhost's upend_idx/done_idx (which run modulo
  // UIO_MAXIOV). 2^16 is a multiple of every valid ring size, so `idx & mask_` names the same
  // slot across the wrap, and produced - done stays exact since it never exceeds the limit.
  std::uint16_t produced_ = 0;
  std::uint16_t done_ = 0;
  std::vector<Slot> slots_;
  bool begin_armed_ = false;
  // The error window (vhost's tx_packets / tx_zcopy_err), restarted every 1024 packets.
  std::uint32_t window_packets_ = 0;
  std::uint32_t window_errors_ = 0;
  Stats stats_;
};

}  // namespace unetback::zerocopy
