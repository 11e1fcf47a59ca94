#include "backend/vif/hash.hpp"

#include <algorithm>

#include "common/net/flow_hash.hpp"

namespace unetback::vif {

std::optional<PacketHash> hash_frame(const HashSettings& s, std::span<const std::byte> frame) {
  if (!s.active()) return std::nullopt;
  const auto h = net::toeplitz_frame_hash(s.key, s.flags, frame);
  if (!h) return std::nullopt;
  return PacketHash{h->value, h->type};
}

std::uint32_t hash_queue(const HashSettings& s, std::uint32_t hash) {
  if (!s.mapping.empty()) return s.mapping[hash % s.mapping.size()];
  return hash % std::max<std::uint32_t>(1, s.num_queues);
}

}  // namespace unetback::vif
