// Toeplitz hashing of guest-RX packets and the queue it steers them to (netif.h "Hash
// types", Linux netback's hash.c).
//
// The frontend sets an algorithm, the hash types it wants, a key (<= 40 bytes) and a mapping
// table (<= 128 entries) through the control ring (hash_control). The data paths read an
// immutable HashSettings snapshot: a new one is published whole, so a queue never sees half
// a key or half a table (the XSA-270 lesson: validate a shadow, then swap).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "common/net/flow_hash.hpp"

namespace unetback::vif {

/// XEN_NETBK_MAX_HASH_KEY_SIZE and XEN_NETBK_MAX_HASH_MAPPING_SIZE.
inline constexpr std::size_t kHashKeyMax = 40;
inline constexpr std::uint32_t kHashMappingMax = 128;

/// The Toeplitz hash (common/net/flow_hash.hpp).
using net::toeplitz_hash;

/// What the frontend asked for, as one consistent snapshot.
struct HashSettings {
  bool toeplitz = false;                        // SET_HASH_ALGORITHM: Toeplitz (else none)
  std::uint32_t flags = 0;                      // XEN_NETIF_CTRL_HASH_TYPE_* bits
  std::array<std::uint8_t, kHashKeyMax> key{};  // unset octets are zero
  std::vector<std::uint32_t> mapping;           // SET_HASH_MAPPING_SIZE entries (0: modulo)
  std::uint32_t num_queues = 1;

  /// Whether any packet can get a hash: only then does a queue look at its packets' headers.
  [[nodiscard]] bool active() const { return toeplitz && flags != 0; }
};

/// A packet's hash and its type (the bit number, _XEN_NETIF_CTRL_HASH_TYPE_*, as the HASH
/// extra carries it).
struct PacketHash {
  std::uint32_t value = 0;
  std::uint8_t type = 0;
};

/// The hash of an Ethernet frame whose headers start at `frame` (at least up to the ports),
/// over the fields `s.flags` select: IPv4 source+destination (8 bytes), plus TCP ports (12);
/// IPv6 likewise (32, 36). The widest type the flags allow wins; a fragment is never hashed
/// as TCP. Nothing when the frame is not IP, is truncated, or the flags cover none of it.
[[nodiscard]] std::optional<PacketHash> hash_frame(const HashSettings& s,
                                                   std::span<const std::byte> frame);

/// The queue a hashed packet goes to: mapping[hash % size], or hash % num_queues without a
/// table. Always < num_queues (entries are validated when set).
[[nodiscard]] std::uint32_t hash_queue(const HashSettings& s, std::uint32_t hash);

/// Where the control ring publishes snapshots and the queues pick them up: a queue compares
/// generation() (one relaxed load per pass) and takes the lock only when it changed.
class SharedHashSettings {
 public:
  SharedHashSettings() : current_(std::make_shared<const HashSettings>()) {}
  void publish(std::shared_ptr<const HashSettings> s) {
    {
      const std::lock_guard lock(mu_);
      current_ = std::move(s);
    }
    generation_.fetch_add(1, std::memory_order_release);
  }
  [[nodiscard]] std::uint64_t generation() const {
    return generation_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::shared_ptr<const HashSettings> load() const {
    const std::lock_guard lock(mu_);
    return current_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const HashSettings> current_;
  std::atomic<std::uint64_t> generation_{0};
};

}  // namespace unetback::vif
