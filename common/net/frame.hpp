// Ethernet frame parsing for the offload mappings: where the L3 and L4 headers are, and
// MAC address text (the strict `xx:xx:xx:xx:xx:xx` of xenstore `mac` keys).
//
// parse_headers() reads only the bytes it is given (the linear head of a frame; netback
// keeps at least the first 128 bytes linear, XSA-423) and bounds every walk, because the
// bytes come from a guest.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/net/net_error.hpp"
#include "common/util/result.hpp"

namespace unetback::net {

inline constexpr std::size_t kEthHeaderLen = 14;
inline constexpr std::size_t kVlanTagLen = 4;
inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr std::uint16_t kEtherTypeVlan = 0x8100;  // IEEE 802.1Q
inline constexpr std::uint8_t kIpProtoTcp = 6;
inline constexpr std::uint8_t kIpProtoUdp = 17;
inline constexpr std::size_t kIpv4MinHeaderLen = 20;
inline constexpr std::size_t kIpv6HeaderLen = 40;
inline constexpr std::size_t kTcpMinHeaderLen = 20;
inline constexpr std::size_t kUdpHeaderLen = 8;
/// Offsets of the checksum field inside the TCP and UDP headers (RFC 793, RFC 768).
inline constexpr std::size_t kTcpChecksumOffset = 16;
inline constexpr std::size_t kUdpChecksumOffset = 6;
/// How many IPv6 extension headers parse_headers walks before giving up (a guest can chain
/// 8-byte options headers through the whole linear area; bound the work, like Linux's
/// ipv6_skip_exthdr users bound theirs by the pulled length).
inline constexpr int kMaxIpv6ExtHeaders = 8;

struct MacAddress {
  std::array<std::uint8_t, 6> octets{};

  friend constexpr bool operator==(const MacAddress&, const MacAddress&) = default;
  [[nodiscard]] constexpr bool is_multicast() const { return (octets[0] & 0x01) != 0; }
  [[nodiscard]] constexpr bool is_zero() const {
    return (octets[0] | octets[1] | octets[2] | octets[3] | octets[4] | octets[5]) == 0;
  }
};

/// Parses exactly `xx:xx:xx:xx:xx:xx` (two hex digits per octet, either case, ':' only,
/// nothing before or after). Anything else is NetError::bad_mac.
[[nodiscard]] Result<MacAddress> parse_mac(std::string_view text);
/// Lower-case `xx:xx:xx:xx:xx:xx`.
[[nodiscard]] std::string format_mac(const MacAddress& mac);

/// Where the headers of one Ethernet frame are. Offsets are from the start of the frame.
struct HeaderInfo {
  std::size_t l2_len = 0;             // Ethernet header, including a VLAN tag if present
  std::optional<std::uint16_t> vlan;  // the 802.1Q TCI, if tagged
  std::uint16_t l3_proto = 0;         // EtherType after any VLAN tag
  std::size_t l3_offset = 0;          // == l2_len
  std::uint8_t l4_proto = 0;          // IPv4 protocol / final IPv6 next header; 0 if not IP
  std::size_t l4_offset = 0;          // first byte after the IP header (+ IPv6 ext headers)
  std::size_t l4_header_len = 0;      // TCP header incl. options, 8 for UDP; 0 if not parsed
  bool is_fragment = false;           // IPv4 MF/offset or an IPv6 fragment header
  bool first_fragment = false;        // fragment with offset 0 (its L4 header is present)

  [[nodiscard]] bool is_ipv4() const { return l3_proto == kEtherTypeIpv4; }
  [[nodiscard]] bool is_ipv6() const { return l3_proto == kEtherTypeIpv6; }
  /// Bytes up to the end of the L4 header (virtio_net_hdr.hdr_len for GSO).
  [[nodiscard]] std::size_t headers_len() const { return l4_offset + l4_header_len; }
};

/// Parses Ethernet (+ one 802.1Q tag), IPv4 or IPv6 (hop-by-hop, routing, destination
/// options, fragment and AH extension headers, at most kMaxIpv6ExtHeaders), and a TCP or
/// UDP header when the packet is not a non-first fragment. A frame whose EtherType is not IP
/// parses successfully with l4_proto 0. Errors: NetError::truncated (a header runs past
/// `head`), NetError::bad_header, NetError::too_many_ext_headers.
[[nodiscard]] Result<HeaderInfo> parse_headers(std::span<const std::byte> head);

/// The pseudo-header sum for the frame's L4 checksum, with `l4_len` the bytes from
/// l4_offset to the end of the frame. Requires an IPv4/IPv6 HeaderInfo over the same `head`.
[[nodiscard]] Result<std::uint16_t> pseudo_header_sum(std::span<const std::byte> head,
                                                      const HeaderInfo& info, std::size_t l4_len);

/// Checks a whole linear frame's TCP or UDP checksum (a UDP checksum of 0 over IPv4 means
/// "none" and passes, RFC 768). Errors as parse_headers, plus unsupported_protocol for
/// non-TCP/UDP and fragment for IP fragments.
[[nodiscard]] Result<bool> verify_l4_checksum(std::span<const std::byte> frame);
/// Checks an IPv4 header checksum (true for IPv6 frames, which have none).
[[nodiscard]] Result<bool> verify_ipv4_header_checksum(std::span<const std::byte> frame);

}  // namespace unetback::net
