// Big-endian (network order) loads and stores on byte spans. Packet headers are never
// assumed aligned: a 14-byte Ethernet header (18 with a VLAN tag) after a 12-byte
// virtio_net_hdr puts the IP header at any offset, so every access goes byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace unetback::net {

[[nodiscard]] constexpr std::uint8_t load_u8(std::span<const std::byte> b, std::size_t off) {
  return static_cast<std::uint8_t>(b[off]);
}
[[nodiscard]] constexpr std::uint16_t load_be16(std::span<const std::byte> b, std::size_t off) {
  return static_cast<std::uint16_t>((static_cast<unsigned>(b[off]) << 8) |
                                    static_cast<unsigned>(b[off + 1]));
}
[[nodiscard]] constexpr std::uint32_t load_be32(std::span<const std::byte> b, std::size_t off) {
  return (std::uint32_t{load_be16(b, off)} << 16) | load_be16(b, off + 2);
}
constexpr void store_be16(std::span<std::byte> b, std::size_t off, std::uint16_t v) {
  b[off] = static_cast<std::byte>(v >> 8);
  b[off + 1] = static_cast<std::byte>(v & 0xFF);
}
constexpr void store_be32(std::span<std::byte> b, std::size_t off, std::uint32_t v) {
  store_be16(b, off, static_cast<std::uint16_t>(v >> 16));
  store_be16(b, off + 2, static_cast<std::uint16_t>(v & 0xFFFF));
}

}  // namespace unetback::net
