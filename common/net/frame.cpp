#include "common/net/frame.hpp"

#include "common/net/bytes.hpp"
#include "common/net/checksum.hpp"

namespace unetback::net {
namespace {

constexpr std::uint8_t kIpv6HopByHop = 0;
constexpr std::uint8_t kIpv6Routing = 43;
constexpr std::uint8_t kIpv6Fragment = 44;
constexpr std::uint8_t kIpv6Ah = 51;
constexpr std::uint8_t kIpv6DestOpts = 60;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses the TCP or UDP header at info.l4_offset (when the packet carries one).
std::error_code parse_l4(std::span<const std::byte> head, HeaderInfo& info) {
  if (info.is_fragment && !info.first_fragment) return {};  // no L4 header in this packet
  const std::size_t off = info.l4_offset;
  if (info.l4_proto == kIpProtoTcp) {
    if (head.size() < off + kTcpMinHeaderLen) return NetError::truncated;
    const std::size_t doff = static_cast<std::size_t>(load_u8(head, off + 12) >> 4) * 4;
    if (doff < kTcpMinHeaderLen) return NetError::bad_header;
    if (head.size() < off + doff) return NetError::truncated;
    info.l4_header_len = doff;
  } else if (info.l4_proto == kIpProtoUdp) {
    if (head.size() < off + kUdpHeaderLen) return NetError::truncated;
    info.l4_header_len = kUdpHeaderLen;
  }
  return {};
}

std::error_code parse_ipv4(std::span<const std::byte> head, HeaderInfo& info) {
  const std::size_t l3 = info.l3_offset;
  if (head.size() < l3 + kIpv4MinHeaderLen) return NetError::truncated;
  const std::uint8_t ver_ihl = load_u8(head, l3);
  if ((ver_ihl >> 4) != 4) return NetError::bad_header;
  const std::size_t ihl = static_cast<std::size_t>(ver_ihl & 0x0F) * 4;
  if (ihl < kIpv4MinHeaderLen) return NetError::bad_header;
  if (head.size() < l3 + ihl) return NetError::truncated;
  const std::uint16_t frag = load_be16(head, l3 + 6);
  const bool more_fragments = (frag & 0x2000) != 0;
  const std::uint16_t frag_offset = frag & 0x1FFF;
  info.is_fragment = more_fragments || frag_offset != 0;
  info.first_fragment = info.is_fragment && frag_offset == 0;
  info.l4_proto = load_u8(head, l3 + 9);
  info.l4_offset = l3 + ihl;
  return parse_l4(head, info);
}

std::error_code parse_ipv6(std::span<const std::byte> head, HeaderInfo& info) {
  const std::size_t l3 = info.l3_offset;
  if (head.size() < l3 + kIpv6HeaderLen) return NetError::truncated;
  if ((load_u8(head, l3) >> 4) != 6) return NetError::bad_header;
  std::uint8_t next = load_u8(head, l3 + 6);
  std::size_t off = l3 + kIpv6HeaderLen;
  for (int walked = 0;; ++walked) {
    const bool is_ext = next == kIpv6HopByHop || next == kIpv6Routing || next == kIpv6DestOpts ||
                        next == kIpv6Fragment || next == kIpv6Ah;
    if (!is_ext) break;
    if (walked == kMaxIpv6ExtHeaders) return NetError::too_many_ext_headers;
    if (head.size() < off + 2) return NetError::truncated;
    std::size_t len = 0;
    if (next == kIpv6Fragment) {
      len = 8;
      if (head.size() < off + len) return NetError::truncated;
      const std::uint16_t field = load_be16(head, off + 2);
      const bool more_fragments = (field & 0x1) != 0;
      const std::uint16_t frag_offset = field & 0xFFF8;
      // An "atomic fragment" (offset 0, M clear) is a whole packet (RFC 8200 §4.5; Linux's
      // skb_checksum_setup_ipv6 treats it so too).
      if (more_fragments || frag_offset != 0) {
        info.is_fragment = true;
        info.first_fragment = frag_offset == 0;
      }
    } else if (next == kIpv6Ah) {
      len = (static_cast<std::size_t>(load_u8(head, off + 1)) + 2) * 4;  // RFC 4302: 32-bit words
    } else {
      len = (static_cast<std::size_t>(load_u8(head, off + 1)) + 1) * 8;  // RFC 8200: 8-octet units
    }
    if (head.size() < off + len) return NetError::truncated;
    next = load_u8(head, off);
    off += len;
    // After a non-first fragment's header only payload follows: nothing more to walk.
    if (info.is_fragment && !info.first_fragment) break;
  }
  info.l4_proto = next;
  info.l4_offset = off;
  return parse_l4(head, info);
}

}  // namespace

Result<MacAddress> parse_mac(std::string_view text) {
  constexpr std::size_t kLen = 17;  // 6 * 2 hex digits + 5 colons
  if (text.size() != kLen) return make_error_code(NetError::bad_mac);
  MacAddress mac;
  for (std::size_t i = 0; i < 6; ++i) {
    const std::size_t pos = i * 3;
    const int hi = hex_value(text[pos]);
    const int lo = hex_value(text[pos + 1]);
    if (hi < 0 || lo < 0) return make_error_code(NetError::bad_mac);
    if (i < 5 && text[pos + 2] != ':') return make_error_code(NetError::bad_mac);
    mac.octets[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return mac;
}

std::string format_mac(const MacAddress& mac) {
  constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(17);
  for (std::size_t i = 0; i < 6; ++i) {
    if (i != 0) out.push_back(':');
    out.push_back(kDigits[mac.octets[i] >> 4]);
    out.push_back(kDigits[mac.octets[i] & 0x0F]);
  }
  return out;
}

Result<HeaderInfo> parse_headers(std::span<const std::byte> head) {
  HeaderInfo info;
  if (head.size() < kEthHeaderLen) return make_error_code(NetError::truncated);
  std::uint16_t ethertype = load_be16(head, 12);
  std::size_t l2 = kEthHeaderLen;
  if (ethertype == kEtherTypeVlan) {
    if (head.size() < kEthHeaderLen + kVlanTagLen) return make_error_code(NetError::truncated);
    info.vlan = load_be16(head, 14);
    ethertype = load_be16(head, 16);
    l2 += kVlanTagLen;
  }
  info.l2_len = l2;
  info.l3_offset = l2;
  info.l3_proto = ethertype;
  std::error_code ec;
  if (ethertype == kEtherTypeIpv4) {
    ec = parse_ipv4(head, info);
  } else if (ethertype == kEtherTypeIpv6) {
    ec = parse_ipv6(head, info);
  }
  if (ec) return ec;
  return info;
}

Result<std::uint16_t> pseudo_header_sum(std::span<const std::byte> head, const HeaderInfo& info,
                                        std::size_t l4_len) {
  const std::size_t l3 = info.l3_offset;
  ChecksumAccumulator acc;
  if (info.is_ipv4()) {
    if (head.size() < l3 + kIpv4MinHeaderLen) return make_error_code(NetError::truncated);
    acc.add(head.subspan(l3 + 12, 8));  // source and destination addresses
    acc.add_be16(info.l4_proto);
  } else if (info.is_ipv6()) {
    if (head.size() < l3 + kIpv6HeaderLen) return make_error_code(NetError::truncated);
    // Like Linux's skb_checksum_setup_ipv6 (which the guest's own stack mirrors), the
    // destination is the IPv6 header's, not a routing header's final hop.
    acc.add(head.subspan(l3 + 8, 32));
    acc.add_be16(info.l4_proto);
  } else {
    return make_error_code(NetError::unsupported_protocol);
  }
  // The length enters as a 32-bit quantity (both halves), as in the kernel's
  // csum_tcpudp_magic, so a GSO super-frame's partial sum matches the kernel's later
  // per-segment adjustment.
  if (l4_len > 0xFFFFFFFFu) return make_error_code(NetError::bad_header);
  acc.add_be16(static_cast<std::uint16_t>(l4_len >> 16));
  acc.add_be16(static_cast<std::uint16_t>(l4_len & 0xFFFF));
  return acc.folded();
}

Result<bool> verify_l4_checksum(std::span<const std::byte> frame) {
  auto parsed = parse_headers(frame);
  if (!parsed) return parsed.error();
  const HeaderInfo& info = *parsed;
  if (!info.is_ipv4() && !info.is_ipv6()) return make_error_code(NetError::unsupported_protocol);
  if (info.l4_proto != kIpProtoTcp && info.l4_proto != kIpProtoUdp) {
    return make_error_code(NetError::unsupported_protocol);
  }
  if (info.is_fragment) return make_error_code(NetError::fragment);
  // The L4 length comes from the IP header: a short frame may carry Ethernet padding.
  std::size_t ip_end = 0;
  if (info.is_ipv4()) {
    ip_end = info.l3_offset + load_be16(frame, info.l3_offset + 2);
  } else {
    ip_end = info.l3_offset + kIpv6HeaderLen + load_be16(frame, info.l3_offset + 4);
  }
  if (ip_end > frame.size() || ip_end < info.headers_len()) {
    return make_error_code(NetError::truncated);
  }
  const std::size_t l4_len = ip_end - info.l4_offset;
  if (info.l4_proto == kIpProtoUdp && info.is_ipv4() &&
      load_be16(frame, info.l4_offset + kUdpChecksumOffset) == 0) {
    return true;  // RFC 768: zero means the sender computed no checksum
  }
  auto pseudo = pseudo_header_sum(frame, info, l4_len);
  if (!pseudo) return pseudo.error();
  ChecksumAccumulator acc;
  acc.add_be16(*pseudo);
  acc.add(frame.subspan(info.l4_offset, l4_len));
  return checksum_ok(acc);
}

Result<bool> verify_ipv4_header_checksum(std::span<const std::byte> frame) {
  auto parsed = parse_headers(frame);
  if (!parsed) return parsed.error();
  if (!parsed->is_ipv4()) return true;
  ChecksumAccumulator acc;
  acc.add(frame.subspan(parsed->l3_offset, parsed->l4_offset - parsed->l3_offset));
  return checksum_ok(acc);
}

}  // namespace unetback::net
