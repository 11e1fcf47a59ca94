#include "backend/vif/mcast_filter.hpp"

namespace unetback::vif {
namespace {

std::uint64_t pack(std::span<const std::uint8_t, 6> mac) {
  std::uint64_t v = 0;
  for (std::uint8_t b : mac) v = (v << 8) | b;
  return v;
}

}  // namespace

bool McastFilter::add(std::span<const std::uint8_t, 6> mac) {
  const std::lock_guard lock(mu_);
  if (count_ == kMax) return false;
  for (auto& e : entries_) {
    if (e.load(std::memory_order_relaxed) == 0) {
      store(static_cast<std::size_t>(&e - entries_.data()), pack(mac) | kValid);
      ++count_;
      return true;
    }
  }
  return false;
}

void McastFilter::remove(std::span<const std::uint8_t, 6> mac) {
  const std::lock_guard lock(mu_);
  const std::uint64_t want = pack(mac) | kValid;
  for (auto& e : entries_) {
    if (e.load(std::memory_order_relaxed) == want) {
      store(static_cast<std::size_t>(&e - entries_.data()), 0);
      --count_;
      return;
    }
  }
}

void McastFilter::clear() {
  const std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < kMax; ++i) store(i, 0);
  count_ = 0;
}

void McastFilter::store(std::size_t i, std::uint64_t v) {
  entries_[i].store(v, std::memory_order_relaxed);
  if (mirror_ != nullptr)
    std::atomic_ref<std::uint64_t>(mirror_[i]).store(v, std::memory_order_relaxed);
}

void McastFilter::mirror_to(std::uint64_t* words) {
  const std::lock_guard lock(mu_);
  mirror_ = words;
  for (std::size_t i = 0; i < kMax; ++i) store(i, entries_[i].load(std::memory_order_relaxed));
}

std::size_t McastFilter::restore(std::uint64_t* words) {
  const std::lock_guard lock(mu_);
  std::size_t refused = 0;
  count_ = 0;
  for (std::size_t i = 0; i < kMax; ++i) {
    const std::uint64_t v =
        std::atomic_ref<std::uint64_t>(words[i]).load(std::memory_order_relaxed);
    // An entry is a MAC (48 bits) with kValid set; anything else was never written by store().
    const bool entry = (v >> 48) == 1;
    if (v != 0 && !entry) ++refused;
    store(i, entry ? v : 0);
    if (entry) ++count_;
  }
  return refused;
}

std::size_t McastFilter::size() const {
  const std::lock_guard lock(mu_);
  return count_;
}

bool McastFilter::accepts(std::span<const std::byte, 6> dst) const {
  if (!enabled()) return true;
  if ((std::to_integer<unsigned>(dst[0]) & 1u) == 0) return true;  // unicast
  std::uint64_t v = 0;
  for (std::byte b : dst) v = (v << 8) | std::to_integer<std::uint64_t>(b);
  if (v == 0xffff'ffff'ffffULL) return true;  // broadcast is not PACKET_MULTICAST
  v |= kValid;
  for (const auto& e : entries_)
    if (e.load(std::memory_order_relaxed) == v) return true;
  return false;
}

}  // namespace unetback::vif
