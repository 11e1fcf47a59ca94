#include "common/net/frame_builder.hpp"

#include <stdexcept>

#include "common/net/bytes.hpp"
#include "common/net/checksum.hpp"

namespace unetback::net {
namespace {

constexpr std::uint8_t kNop = 1;  // IPv4 and TCP option "no operation"

void put(std::vector<std::byte>& out, std::size_t off, std::span<const std::uint8_t> bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) out[off + i] = std::byte{bytes[i]};
}

}  // namespace

std::vector<std::byte> build_frame(const FrameSpec& spec) {
  if (spec.ipv4_options_len % 4 != 0 || spec.ipv4_options_len > 40 ||
      spec.tcp_options_len % 4 != 0 || spec.tcp_options_len > 40) {
    throw std::invalid_argument("build_frame: option lengths must be multiples of 4, <= 40");
  }
  const bool v4 = spec.ip == IpVersion::v4;
  const bool tcp = spec.l4 == L4Proto::tcp;
  const std::size_t l2 = kEthHeaderLen + (spec.vlan_tci ? kVlanTagLen : 0);
  const std::size_t ip_hdr = v4 ? kIpv4MinHeaderLen + spec.ipv4_options_len : kIpv6HeaderLen;
  const std::size_t ext_len = v4 ? 0 : spec.ipv6_ext_headers.size() * 8;
  const std::size_t l4_hdr = tcp ? kTcpMinHeaderLen + spec.tcp_options_len : kUdpHeaderLen;
  const std::size_t l4_len = l4_hdr + spec.payload_len;
  const std::size_t l3 = l2;
  const std::size_t l4 = l3 + ip_hdr + ext_len;
  if (v4 && ip_hdr + l4_len > 0xFFFF) throw std::invalid_argument("build_frame: IPv4 too long");
  if (!v4 && ext_len + l4_len > 0xFFFF) throw std::invalid_argument("build_frame: IPv6 too long");
  if (!tcp && l4_len > 0xFFFF) throw std::invalid_argument("build_frame: UDP too long");

  std::vector<std::byte> f(l4 + l4_len);
  std::span<std::byte> s(f);

  // Ethernet (+ 802.1Q).
  put(f, 0, spec.dst_mac.octets);
  put(f, 6, spec.src_mac.octets);
  const std::uint16_t ethertype = v4 ? kEtherTypeIpv4 : kEtherTypeIpv6;
  if (spec.vlan_tci) {
    store_be16(s, 12, kEtherTypeVlan);
    store_be16(s, 14, *spec.vlan_tci);
    store_be16(s, 16, ethertype);
  } else {
    store_be16(s, 12, ethertype);
  }

  const auto l4_proto = static_cast<std::uint8_t>(spec.l4);
  if (v4) {
    s[l3] = std::byte{static_cast<std::uint8_t>(0x40 | (ip_hdr / 4))};
    s[l3 + 1] = std::byte{0};                                            // DSCP/ECN
    store_be16(s, l3 + 2, static_cast<std::uint16_t>(ip_hdr + l4_len));  // total length
    store_be16(s, l3 + 4, 0x1234);                                       // identification
    store_be16(s, l3 + 6, spec.ipv4_frag_field);
    s[l3 + 8] = std::byte{64};  // TTL
    s[l3 + 9] = std::byte{l4_proto};
    put(f, l3 + 12, spec.src_ipv4);
    put(f, l3 + 16, spec.dst_ipv4);
    for (std::size_t i = kIpv4MinHeaderLen; i < ip_hdr; ++i) s[l3 + i] = std::byte{kNop};
    store_be16(s, l3 + 10, internet_checksum(s.subspan(l3, ip_hdr)));
  } else {
    s[l3] = std::byte{0x60};
    store_be16(s, l3 + 4, static_cast<std::uint16_t>(ext_len + l4_len));  // payload length
    s[l3 + 6] = std::byte{spec.ipv6_ext_headers.empty() ? l4_proto : spec.ipv6_ext_headers[0]};
    s[l3 + 7] = std::byte{64};  // hop limit
    put(f, l3 + 8, spec.src_ipv6);
    put(f, l3 + 24, spec.dst_ipv6);
    std::size_t off = l3 + kIpv6HeaderLen;
    for (std::size_t i = 0; i < spec.ipv6_ext_headers.size(); ++i) {
      const std::uint8_t next =
          i + 1 < spec.ipv6_ext_headers.size() ? spec.ipv6_ext_headers[i + 1] : l4_proto;
      s[off] = std::byte{next};
      s[off + 1] = std::byte{0};  // 8 bytes: length 0 (options) / fragment reserved
      if (spec.ipv6_ext_headers[i] == 44) {
        store_be16(s, off + 2, 0);  // offset 0, M clear: an atomic fragment
        store_be32(s, off + 4, 0xabcdef01);
      } else if (spec.ipv6_ext_headers[i] == 43) {
        s[off + 2] = std::byte{253};  // routing type 253: experimental (RFC 4727)
        s[off + 3] = std::byte{0};    // segments left 0: receivers ignore the header
      } else {
        s[off + 2] = std::byte{1};  // PadN covering the 6 option bytes (RFC 8200 §4.2)
        s[off + 3] = std::byte{4};
      }
      off += 8;
    }
  }

  if (tcp) {
    store_be16(s, l4, spec.src_port);
    store_be16(s, l4 + 2, spec.dst_port);
    store_be32(s, l4 + 4, spec.tcp_seq);
    store_be32(s, l4 + 8, 1);  // ack
    s[l4 + 12] = std::byte{static_cast<std::uint8_t>((l4_hdr / 4) << 4)};
    s[l4 + 13] = std::byte{spec.tcp_flags};
    store_be16(s, l4 + 14, 0xFFFF);  // window
    for (std::size_t i = kTcpMinHeaderLen; i < l4_hdr; ++i) s[l4 + i] = std::byte{kNop};
  } else {
    store_be16(s, l4, spec.src_port);
    store_be16(s, l4 + 2, spec.dst_port);
    store_be16(s, l4 + 4, static_cast<std::uint16_t>(l4_len));
  }
  for (std::size_t i = 0; i < spec.payload_len; ++i) {
    s[l4 + l4_hdr + i] = std::byte{static_cast<std::uint8_t>(spec.payload_seed + i)};
  }

  const std::size_t field = l4 + (tcp ? kTcpChecksumOffset : kUdpChecksumOffset);
  if (spec.checksum == L4ChecksumMode::zero) return f;
  // The pseudo-header comes from the spec, not from parsing the result, so frames the parser
  // refuses on purpose (too many extension headers…) still get correct checksums.
  ChecksumAccumulator pseudo_acc;
  if (v4) {
    pseudo_acc = pseudo_header_ipv4(std::as_bytes(std::span(spec.src_ipv4)),
                                    std::as_bytes(std::span(spec.dst_ipv4)), l4_proto,
                                    static_cast<std::uint16_t>(l4_len));
  } else {
    pseudo_acc = pseudo_header_ipv6(std::as_bytes(std::span(spec.src_ipv6)),
                                    std::as_bytes(std::span(spec.dst_ipv6)), l4_proto,
                                    static_cast<std::uint32_t>(l4_len));
  }
  const std::uint16_t pseudo = pseudo_acc.folded();
  if (spec.checksum == L4ChecksumMode::partial) {
    store_be16(s, field, pseudo);
    return f;
  }
  ChecksumAccumulator acc;
  acc.add_be16(pseudo);
  acc.add(s.subspan(l4, l4_len));
  std::uint16_t value = acc.checksum();
  if (!tcp && value == 0) value = 0xFFFF;  // RFC 768
  store_be16(s, field, value);
  return f;
}

}  // namespace unetback::net
