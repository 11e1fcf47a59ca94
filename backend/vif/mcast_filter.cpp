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
      e.store(pack(mac) | kValid, std::memory_order_relaxed);
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
      e.store(0, std::memory_order_relaxed);
      --count_;
      return;
    }
  }
}

void McastFilter::clear() {
  const std::lock_guard lock(mu_);
  for (auto& e : entries_) e.store(0, std::memory_order_relaxed);
  count_ = 0;
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
