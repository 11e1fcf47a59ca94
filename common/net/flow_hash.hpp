// Toeplitz hashing of a frame's flow (netif.h "Hash types"; the Microsoft RSS definition),
// shared by the backend (guest-RX hashing for the control ring) and the frontend shim
// (win-xenvif's HASH extras on guest TX).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace unetback::net {

/// The Toeplitz hash of `input` under `key` (netif.h's definition: for every input bit set,
/// from the left, XOR in the 32 key bits starting at that bit position; key bits past the
/// key's end are zero).
[[nodiscard]] std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key,
                                          std::span<const std::uint8_t> input);

/// A frame's hash and its type (the bit number, _XEN_NETIF_CTRL_HASH_TYPE_*).
struct FlowHash {
  std::uint32_t value = 0;
  std::uint8_t type = 0;
};

/// The hash of an Ethernet frame whose headers start at `frame` (at least up to the ports),
/// over the fields `hash_types` (XEN_NETIF_CTRL_HASH_TYPE_* bits) select: IPv4 source +
/// destination (8 bytes), plus TCP ports (12); IPv6 likewise (32, 36). The widest type the
/// bits allow wins; a fragment is never hashed as TCP. Nothing when the frame is not IP, is
/// truncated, or the bits cover none of it.
[[nodiscard]] std::optional<FlowHash> toeplitz_frame_hash(std::span<const std::uint8_t> key,
                                                          std::uint32_t hash_types,
                                                          std::span<const std::byte> frame);

}  // namespace unetback::net
