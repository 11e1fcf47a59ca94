#include "common/net/flow_hash.hpp"

#include <array>
#include <bit>
#include <cstring>

#include "common/net/frame.hpp"
#include "common/wire/netif.hpp"

namespace unetback::net {

std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key,
                            std::span<const std::uint8_t> input) {
  // `window` holds key bits [8*i, 8*i + 64) while input byte i is processed: the 32 key bits
  // for input bit b of that byte are then bits [b, b + 32) of the window.
  auto key_byte = [&](std::size_t i) -> std::uint64_t { return i < key.size() ? key[i] : 0; };
  std::uint64_t window = 0;
  for (std::size_t i = 0; i < 8; ++i) window = (window << 8) | key_byte(i);
  std::uint32_t result = 0;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::uint8_t byte = input[i];
    for (unsigned b = 0; b < 8; ++b) {
      if ((byte & (0x80u >> b)) != 0) result ^= static_cast<std::uint32_t>((window << b) >> 32);
    }
    window = (window << 8) | key_byte(i + 8);
  }
  return result;
}

std::optional<FlowHash> toeplitz_frame_hash(std::span<const std::uint8_t> key,
                                            std::uint32_t hash_types,
                                            std::span<const std::byte> frame) {
  // The project's bounded header walk (Ethernet + one VLAN tag, IPv4 or IPv6 with its
  // extension headers, the TCP header): a frame it refuses is not hashed.
  const auto h = parse_headers(frame);
  if (!h) return std::nullopt;
  std::array<std::uint8_t, 36> in{};
  std::size_t addr_len = 0;
  std::uint32_t l3_type = 0, l4_type = 0;
  if (h->is_ipv4()) {
    std::memcpy(in.data(), frame.data() + h->l3_offset + 12, 8);  // source, destination
    addr_len = 8;
    l3_type = wire::kHashTypeIpv4;
    l4_type = wire::kHashTypeIpv4Tcp;
  } else if (h->is_ipv6()) {
    std::memcpy(in.data(), frame.data() + h->l3_offset + 8, 32);
    addr_len = 32;
    l3_type = wire::kHashTypeIpv6;
    l4_type = wire::kHashTypeIpv6Tcp;
  } else {
    return std::nullopt;
  }
  // netif.h: the 'maximal' type the frontend set is calculated; any fragment (netback's
  // flow dissector flags it) is hashed over the addresses only.
  const bool tcp = h->l4_proto == kIpProtoTcp && !h->is_fragment && h->l4_header_len != 0;
  if (tcp && (hash_types & l4_type) != 0) {
    std::memcpy(in.data() + addr_len, frame.data() + h->l4_offset, 4);  // the two ports
    return FlowHash{toeplitz_hash(key, std::span(in.data(), addr_len + 4)),
                    static_cast<std::uint8_t>(std::countr_zero(l4_type))};
  }
  if ((hash_types & l3_type) != 0)
    return FlowHash{toeplitz_hash(key, std::span(in.data(), addr_len)),
                    static_cast<std::uint8_t>(std::countr_zero(l3_type))};
  return std::nullopt;
}

}  // namespace unetback::net
