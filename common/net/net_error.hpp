// NetError: why a frame's headers or offload metadata cannot be handled. These are the
// cases where Linux netback (checksum_setup, xenvif_set_skb_gso) or the TAP driver
// (virtio_net_hdr_to_skb) would drop the packet, so the data paths drop and count them.
// They are std::error_codes so they travel in Result<T>; each compares equal to the generic
// errc that best describes it (EINVAL/EPROTO/EMSGSIZE…) as well as to itself.
#pragma once

#include <system_error>
#include <type_traits>

namespace unetback::net {

enum class NetError : int {
  /// The headers run past the linear bytes given (or the frame is shorter than its headers).
  truncated = 1,
  /// Not IPv4/IPv6, or an L4 protocol other than TCP/UDP where a checksum must be placed.
  unsupported_protocol,
  /// An IP/TCP header whose version or length field is impossible (IHL < 5, doff < 5…).
  bad_header,
  /// More IPv6 extension headers than we are willing to walk (bounded against hostile chains).
  too_many_ext_headers,
  /// Checksum offload or GSO requested on an IP fragment (no L4 header to patch).
  fragment,
  /// GSO on a packet without a TCP header (netback drops these).
  no_transport_header,
  /// GSO type none/unknown, or gso_size 0 (netback: "GSO size must not be zero") or 0xFFFF
  /// (the kernel's GSO_BY_FRAGS marker, refused by the TAP).
  bad_gso,
  /// GSO TCPv4 on an IPv6 packet or TCPv6 on an IPv4 packet.
  gso_type_mismatch,
  /// A GSO type netif cannot express (UDP fragmentation offload, UDP segmentation).
  unsupported_gso_type,
  /// The frontend did not negotiate this GSO type (or lacks feature-sg / checksum offload).
  gso_not_negotiated,
  /// csum_start/csum_offset point outside the frame.
  bad_checksum_offsets,
  /// A MAC address string that is not exactly `xx:xx:xx:xx:xx:xx`.
  bad_mac,
};

[[nodiscard]] const std::error_category& net_category() noexcept;
[[nodiscard]] std::error_code make_error_code(NetError e) noexcept;
/// A short stable name ("truncated", "bad_gso", …) for counters and logs.
[[nodiscard]] const char* net_error_name(NetError e) noexcept;

}  // namespace unetback::net

template <>
struct std::is_error_code_enum<unetback::net::NetError> : std::true_type {};
