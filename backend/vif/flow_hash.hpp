// flow_hash: which of a receiver's queues a switched packet goes to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace unetback::vif {

/// A packet's 32-bit flow hash (MACs, IPv4/IPv6 addresses, TCP/UDP ports when present), to
/// spread a receiver's traffic over its queues while keeping each flow in order.
[[nodiscard]] std::uint32_t flow_hash(std::span<const std::byte> head);

}  // namespace unetback::vif
