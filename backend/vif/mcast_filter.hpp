// McastFilter: a vif's guest-RX multicast filter (netif.h "Multicast control"; netback's
// xenvif_mcast_add/del/match). With request-multicast-control set, a multicast frame for the
// guest is delivered only if its destination was added through a TX MCAST_ADD extra.
//
// Linux's rules: at most 64 entries (XEN_NETBK_MCAST_MAX); an add past them is refused
// (the dummy request answered ERROR) and the filter stays as it was; a delete removes one
// matching entry (absent: nothing happens, still OKAY); broadcast is never filtered.
//
// Threads: any queue's TX path adds and deletes (under a lock); every queue's RX path
// matches without one (the entries are atomics; a frame racing an add may go either way).
// The list outlives the daemon's process in the vif's state record (mirror_to), so that a
// successor that adopts the vif filters as the guest asked (the guest sends its groups once).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

namespace unetback::vif {

class McastFilter {
 public:
  static constexpr std::size_t kMax = 64;  // XEN_NETBK_MCAST_MAX

  /// request-multicast-control (sampled at connect, then watched).
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  [[nodiscard]] bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  /// False when the filter holds kMax entries already.
  bool add(std::span<const std::uint8_t, 6> mac);
  void remove(std::span<const std::uint8_t, 6> mac);
  void clear();
  [[nodiscard]] std::size_t size() const;

  /// From now on every entry is also stored into `words` (kMax of them: a state record's
  /// McastRecord), starting with the entries held now; nullptr stops it. The words must stay
  /// mapped until it is stopped.
  void mirror_to(std::uint64_t* words);
  /// Takes the entries `words` hold (a state record's, when a vif is adopted) in place of the
  /// present ones. Words that are no entry are skipped: the count of them is returned.
  std::size_t restore(std::uint64_t* words);

  /// Whether the guest takes a frame for `dst`: always with the filter off, for unicast and
  /// broadcast; a multicast group only if it was added.
  [[nodiscard]] bool accepts(std::span<const std::byte, 6> dst) const;

 private:
  static constexpr std::uint64_t kValid = std::uint64_t{1} << 48;
  mutable std::mutex mu_;
  std::size_t count_ = 0;  // under mu_
  std::atomic<bool> enabled_{false};
  std::array<std::atomic<std::uint64_t>, kMax> entries_{};  // MAC | kValid, or 0
  std::uint64_t* mirror_ = nullptr;                         // under mu_

  void store(std::size_t i, std::uint64_t v);  // under mu_
};

}  // namespace unetback::vif
