// FrameBuilder: well-formed Ethernet/IPv4|IPv6/TCP|UDP frames with chosen sizes and correct
// (or deliberately partial) checksums, for tests and benchmarks of the offload paths, the
// backend and the frontend shim. Not for the data path: it allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/net/frame.hpp"

namespace unetback::net {

enum class IpVersion : std::uint8_t { v4, v6 };
enum class L4Proto : std::uint8_t { tcp = kIpProtoTcp, udp = kIpProtoUdp };

/// How the builder fills the L4 checksum field.
enum class L4ChecksumMode : std::uint8_t {
  full,     // the correct checksum
  partial,  // the pseudo-header sum only, as a checksum-offloading sender leaves it
  zero,     // 0 (e.g. a GSO frame from a guest that did not set csum_blank)
};

struct FrameSpec {
  MacAddress dst_mac{{0x00, 0x16, 0x3e, 0x00, 0x00, 0x02}};
  MacAddress src_mac{{0x00, 0x16, 0x3e, 0x00, 0x00, 0x01}};
  std::optional<std::uint16_t> vlan_tci;  // one 802.1Q tag when set
  IpVersion ip = IpVersion::v4;
  L4Proto l4 = L4Proto::tcp;
  std::array<std::uint8_t, 4> src_ipv4{10, 0, 0, 1};
  std::array<std::uint8_t, 4> dst_ipv4{10, 0, 0, 2};
  std::array<std::uint8_t, 16> src_ipv6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::array<std::uint8_t, 16> dst_ipv6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  /// IPv6 extension headers to insert, in order, each 8 bytes (0 hop-by-hop, 43 routing,
  /// 60 destination options, 44 fragment with offset 0 and M clear).
  std::vector<std::uint8_t> ipv6_ext_headers;
  std::size_t ipv4_options_len = 0;        // multiple of 4, ≤ 40 (NOPs)
  std::size_t tcp_options_len = 0;         // multiple of 4, ≤ 40 (NOPs)
  std::uint16_t ipv4_frag_field = 0x4000;  // DF; set MF (0x2000) / an offset to make fragments
  std::uint16_t src_port = 40000;
  std::uint16_t dst_port = 5201;
  std::uint32_t tcp_seq = 1;
  std::uint8_t tcp_flags = 0x18;  // PSH|ACK
  std::size_t payload_len = 0;
  std::uint8_t payload_seed = 0;  // payload byte i = seed + i (mod 256)
  L4ChecksumMode checksum = L4ChecksumMode::full;
};

/// Builds the frame. Throws std::invalid_argument for a spec that cannot be encoded
/// (option lengths, an IP length over 65535): this is test tooling, a bad spec is a bug.
[[nodiscard]] std::vector<std::byte> build_frame(const FrameSpec& spec);

}  // namespace unetback::net
