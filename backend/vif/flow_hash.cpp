#include "backend/vif/flow_hash.hpp"

#include "common/net/frame.hpp"

namespace unetback::vif {
namespace {

using net::kEthHeaderLen;

std::uint32_t fnv(std::uint32_t h, std::span<const std::byte> bytes) {
  for (const std::byte b : bytes) {
    h ^= static_cast<std::uint8_t>(b);
    h *= 16777619u;
  }
  return h;
}

}  // namespace

std::uint32_t flow_hash(std::span<const std::byte> head) {
  std::uint32_t h = 2166136261u;
  if (head.size() < kEthHeaderLen) return fnv(h, head);
  h = fnv(h, head.first(12));  // both MACs
  const auto ethertype = static_cast<std::uint16_t>((static_cast<unsigned>(head[12]) << 8) |
                                                    static_cast<unsigned>(head[13]));
  std::size_t l4 = 0;
  std::uint8_t proto = 0;
  if (ethertype == 0x0800 && head.size() >= kEthHeaderLen + 20) {
    const std::size_t ihl = std::size_t{static_cast<unsigned>(head[kEthHeaderLen]) & 0x0fU} * 4;
    proto = static_cast<std::uint8_t>(head[kEthHeaderLen + 9]);
    h = fnv(h, head.subspan(kEthHeaderLen + 12, 8));
    l4 = kEthHeaderLen + ihl;
  } else if (ethertype == 0x86dd && head.size() >= kEthHeaderLen + 40) {
    proto = static_cast<std::uint8_t>(head[kEthHeaderLen + 6]);
    h = fnv(h, head.subspan(kEthHeaderLen + 8, 32));
    l4 = kEthHeaderLen + 40;
  }
  if ((proto == 6 || proto == 17) && l4 != 0 && head.size() >= l4 + 4)
    h = fnv(h, head.subspan(l4, 4));
  return h;
}

}  // namespace unetback::vif
