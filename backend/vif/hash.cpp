#include "backend/vif/hash.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/wire/netif.hpp"

namespace unetback::vif {
namespace {

constexpr std::uint16_t kEthIpv4 = 0x0800;
constexpr std::uint16_t kEthIpv6 = 0x86dd;
constexpr std::uint16_t kEthVlan = 0x8100;
constexpr std::uint8_t kProtoTcp = 6;
constexpr std::size_t kEthLen = 14;

std::uint16_t be16(std::span<const std::byte> b, std::size_t at) {
  return static_cast<std::uint16_t>((std::to_integer<unsigned>(b[at]) << 8) |
                                    std::to_integer<unsigned>(b[at + 1]));
}

/// The IPv6 extension headers a TCP header may follow (hop-by-hop, routing, destination
/// options); a fragment header makes the packet a fragment. At most this many are walked.
constexpr int kMaxIpv6ExtHeaders = 8;

}  // namespace

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

std::optional<PacketHash> hash_frame(const HashSettings& s, std::span<const std::byte> frame) {
  if (!s.active() || frame.size() < kEthLen) return std::nullopt;
  std::size_t l3 = kEthLen;
  std::uint16_t ethertype = be16(frame, 12);
  if (ethertype == kEthVlan) {
    if (frame.size() < kEthLen + 4) return std::nullopt;
    ethertype = be16(frame, 16);
    l3 += 4;
  }
  std::array<std::uint8_t, 36> in{};
  std::size_t addr_len = 0;
  std::size_t l4 = 0;
  bool tcp = false;
  std::uint32_t l3_type = 0, l4_type = 0;
  if (ethertype == kEthIpv4) {
    if (frame.size() < l3 + 20) return std::nullopt;
    const auto vihl = std::to_integer<unsigned>(frame[l3]);
    const std::size_t ihl = (vihl & 0x0f) * 4u;
    if ((vihl >> 4) != 4 || ihl < 20 || frame.size() < l3 + ihl) return std::nullopt;
    // Any fragment (MF set or a non-zero offset) is hashed over the addresses only.
    const bool fragment = (be16(frame, l3 + 6) & 0x3fff) != 0;
    tcp = !fragment && std::to_integer<unsigned>(frame[l3 + 9]) == kProtoTcp;
    std::memcpy(in.data(), frame.data() + l3 + 12, 8);
    addr_len = 8;
    l4 = l3 + ihl;
    l3_type = wire::kHashTypeIpv4;
    l4_type = wire::kHashTypeIpv4Tcp;
  } else if (ethertype == kEthIpv6) {
    if (frame.size() < l3 + 40 || (std::to_integer<unsigned>(frame[l3]) >> 4) != 6)
      return std::nullopt;
    std::memcpy(in.data(), frame.data() + l3 + 8, 32);
    addr_len = 32;
    unsigned next = std::to_integer<unsigned>(frame[l3 + 6]);
    std::size_t at = l3 + 40;
    bool fragment = false;
    for (int n = 0; n < kMaxIpv6ExtHeaders && (next == 0 || next == 43 || next == 60 || next == 44);
         ++n) {
      if (frame.size() < at + 8) break;
      if (next == 44) {
        fragment = true;
        break;
      }
      const std::size_t len = (std::to_integer<unsigned>(frame[at + 1]) + 1u) * 8u;
      next = std::to_integer<unsigned>(frame[at]);
      at += len;
    }
    tcp = !fragment && next == kProtoTcp;
    l4 = at;
    l3_type = wire::kHashTypeIpv6;
    l4_type = wire::kHashTypeIpv6Tcp;
  } else {
    return std::nullopt;
  }
  const std::span<const std::uint8_t> key(s.key);
  // netif.h: the 'maximal' type the frontend set is calculated.
  if (tcp && (s.flags & l4_type) != 0 && frame.size() >= l4 + 4) {
    std::memcpy(in.data() + addr_len, frame.data() + l4, 4);
    return PacketHash{toeplitz_hash(key, std::span(in.data(), addr_len + 4)),
                      static_cast<std::uint8_t>(std::countr_zero(l4_type))};
  }
  if ((s.flags & l3_type) != 0)
    return PacketHash{toeplitz_hash(key, std::span(in.data(), addr_len)),
                      static_cast<std::uint8_t>(std::countr_zero(l3_type))};
  return std::nullopt;
}

std::uint32_t hash_queue(const HashSettings& s, std::uint32_t hash) {
  if (!s.mapping.empty()) return s.mapping[hash % s.mapping.size()];
  return hash % std::max<std::uint32_t>(1, s.num_queues);
}

}  // namespace unetback::vif
