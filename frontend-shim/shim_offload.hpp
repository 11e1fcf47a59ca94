// The shim's offload mapping between its TAP (virtio_net_hdr) and netif, the guest's side
// of what netback does on the host's side:
//
//  * TAP read -> netif TX (Linux netfront's xennet_start_xmit): a partial checksum
//    (NEEDS_CSUM) goes out as csum_blank|data_validated, DATA_VALID as data_validated, a
//    TCPv4/v6 super-frame with a GSO extra {type, gso_size}. A partial checksum the backend
//    cannot take (IPv6 without feature-ipv6-csum-offload) is completed here first.
//  * netif RX -> TAP write (xennet_set_skb_gso / checksum_setup): csum_blank becomes
//    NEEDS_CSUM with csum_start/csum_offset found by parsing the headers, data_validated
//    becomes DATA_VALID, a GSO extra becomes GSO TCPV4/6 with gso_size and hdr_len.
//
// Both directions reuse common/net/vnet_hdr's mappings: the shape of the problem is the
// backend's with the roles of TX and RX swapped.
#pragma once

#include <span>

#include "common/net/tap_device.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/util/result.hpp"
#include "frontend-shim/netfront_types.hpp"
#include "frontend-shim/xenbus_keys.hpp"

namespace unetback::shim {

/// What the connection can carry from the guest, as Netfront::connect negotiates it.
struct NegotiatedTx {
  bool sg = false;
  bool gso_tcpv4 = false;
  bool gso_tcpv6 = false;
  bool csum_ipv6 = false;
  friend constexpr bool operator==(const NegotiatedTx&, const NegotiatedTx&) = default;
};

[[nodiscard]] NegotiatedTx negotiate_tx(const netfront::NetfrontOptions& opts,
                                        const netfront::BackendFeatures& backend);

/// The TAP offloads that let the guest kernel hand us exactly what the backend accepts:
/// checksum offload always (netfront never writes feature-no-csum-offload), TSO4/6 only
/// with SG and the backend's GSO (TSO6 also needs IPv6 checksum offload).
[[nodiscard]] net::TapOffloads tap_offloads(const NegotiatedTx& n);

/// Maps one frame read from the TAP (header and frame separately; `frame` may be rewritten
/// to complete a checksum) onto TxMeta. Errors: the frame must be dropped (see map_tap_rx).
[[nodiscard]] Result<netfront::TxMeta> tap_frame_to_tx(const net::VirtioNetHdr& hdr,
                                                       std::span<std::byte> frame,
                                                       const NegotiatedTx& n);
/// The same for a frame held in pieces (e.g. read straight into a TxBuffer's pages); the
/// first piece must hold its L2/L3 headers.
[[nodiscard]] Result<netfront::TxMeta> tap_frame_to_tx(const net::VirtioNetHdr& hdr,
                                                       std::span<const std::span<std::byte>> pieces,
                                                       const NegotiatedTx& n);

/// The TAP header for a received packet of `frame_len` bytes with netif `flags` and `gso`;
/// `head` is its linear start and must hold its headers (error truncated otherwise). May
/// rewrite the L4 checksum field in `head` to the pseudo-header sum (a GSO packet without
/// csum_blank must be written as partial). Errors: the packet must be dropped (malformed
/// headers for its offload flags).
[[nodiscard]] Result<net::VirtioNetHdr> rx_to_tap(wire::RxFlags flags,
                                                  const std::optional<netfront::RxGso>& gso,
                                                  std::span<std::byte> head, std::size_t frame_len);

}  // namespace unetback::shim
