// The mapping between netif's per-packet offload metadata (TX/RX csum flags, GSO extra) and
// the virtio_net_hdr that a TAP opened with IFF_VNET_HDR puts in front of every frame.
//
// Guest TX (netif → TAP) follows Linux netback's submit path: csum_blank becomes
// CHECKSUM_PARTIAL (virtio NEEDS_CSUM with csum_start/csum_offset found by parsing the
// headers, as skb_checksum_setup does), data_validated becomes CHECKSUM_UNNECESSARY
// (DATA_VALID), and a GSO packet without csum_blank is forced to partial with its L4 checksum
// field rewritten to the pseudo-header sum (checksum_setup / rx_gso_checksum_fixup).
//
// Guest RX (TAP → netif) follows Linux netback's rx.c: CHECKSUM_PARTIAL (NEEDS_CSUM) becomes
// csum_blank|data_validated, CHECKSUM_UNNECESSARY (DATA_VALID) becomes data_validated, and a
// GSO extra {TCPV4|TCPV6, gso_size} is emitted only for a GSO type the frontend asked for.
//
// Byte order: the TAP reads and writes the header in the host's order (legacy virtio;
// TUNSETVNETLE/BE are never set), so the fields here are plain host-order integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "common/net/frame.hpp"
#include "common/net/linux_virtio_net.hpp"
#include "common/util/result.hpp"
#include "common/wire/netif.hpp"

namespace unetback::net {

/// The header on the TAP. We configure TUNSETVNETHDRSZ to its 12-byte "mergeable rx
/// buffers" form (see TapDevice): the kernel reads/writes only the first 10 bytes (struct
/// virtio_net_hdr) and skips num_buffers, which we always write as 0.
using VirtioNetHdr = virtio_net_hdr_mrg_rxbuf;
inline constexpr std::size_t kVnetHdrLen = sizeof(VirtioNetHdr);

static_assert(sizeof(virtio_net_hdr) == 10, "virtio 1.x §5.1.6: legacy header is 10 bytes");
static_assert(sizeof(VirtioNetHdr) == 12, "virtio_net_hdr + num_buffers");
static_assert(offsetof(virtio_net_hdr, flags) == 0);
static_assert(offsetof(virtio_net_hdr, gso_type) == 1);
static_assert(offsetof(virtio_net_hdr, hdr_len) == 2);
static_assert(offsetof(virtio_net_hdr, gso_size) == 4);
static_assert(offsetof(virtio_net_hdr, csum_start) == 6);
static_assert(offsetof(virtio_net_hdr, csum_offset) == 8);
static_assert(offsetof(VirtioNetHdr, num_buffers) == 10);

/// virtio gso_type for UDP segmentation (USO); newer than the installed linux headers.
inline constexpr std::uint8_t kVirtioGsoUdpL4 = 5;

/// The GSO extra of a netif packet (netif_extra_info.u.gso).
struct GsoInfo {
  wire::GsoType type = wire::GsoType::none;
  std::uint16_t size = 0;
  friend constexpr bool operator==(const GsoInfo&, const GsoInfo&) = default;
};

/// What a guest TX packet says about offloads: the first request's flags and its GSO extra.
struct GuestTxOffload {
  wire::TxFlags flags;
  std::optional<GsoInfo> gso;
};

/// The TAP header for one guest TX packet, and what we learnt on the way.
struct TxVnet {
  VirtioNetHdr hdr{};
  /// The parsed headers (only when the mapping needed them: csum_blank or GSO).
  std::optional<HeaderInfo> headers;
  /// GSO without csum_blank: the L4 checksum field must be rewritten to the pseudo-header
  /// sum before the frame goes to the TAP (write_partial_checksum()).
  bool needs_partial_fixup = false;
};

/// Maps a guest TX packet's offload metadata onto a virtio_net_hdr. `head` is the linear
/// start of the frame (it must contain every header up to the end of the L4 header);
/// `frame_len` is the whole frame's length. Errors (the packet must be dropped, as netback
/// would): truncated, unsupported_protocol, bad_header, too_many_ext_headers, fragment,
/// no_transport_header, bad_gso, gso_type_mismatch.
[[nodiscard]] Result<TxVnet> map_guest_tx(const GuestTxOffload& offload,
                                          std::span<const std::byte> head, std::size_t frame_len);

/// Writes the pseudo-header sum (the "partial" checksum, not inverted) into the L4 checksum
/// field inside `head`, for a packet whose L4 length is frame_len - l4_offset.
[[nodiscard]] std::error_code write_partial_checksum(std::span<std::byte> head,
                                                     const HeaderInfo& info, std::size_t frame_len);

/// map_guest_tx() followed by the checksum_setup fix-up when needed: the usual entry point
/// for the TX path, which owns a mutable linear copy of the headers.
[[nodiscard]] Result<VirtioNetHdr> prepare_guest_tx(const GuestTxOffload& offload,
                                                    std::span<std::byte> head,
                                                    std::size_t frame_len);

/// What the frontend negotiated (read at connect, as Linux netback's xenbus.c does).
struct FrontendOffloads {
  bool gso_tcpv4 = false;  // feature-gso-tcpv4
  bool gso_tcpv6 = false;  // feature-gso-tcpv6
  bool csum_ipv4 = true;   // !feature-no-csum-offload (absent = on)
  bool csum_ipv6 = false;  // feature-ipv6-csum-offload (absent = off)
  bool sg = false;         // feature-sg
};

/// The netif metadata for one frame read from the TAP.
struct GuestRxOffload {
  wire::RxFlags flags;
  std::optional<GsoInfo> gso;
  /// The frontend cannot take a partial checksum: run complete_checksum(frame, csum_start,
  /// csum_offset) before the copy to the guest.
  bool complete_checksum = false;
  std::uint16_t csum_start = 0;
  std::uint16_t csum_offset = 0;
};

/// Maps a virtio_net_hdr read from the TAP onto netif RX metadata for a frontend with
/// `fe`'s features. `head` is the frame's linear start (only its L2/L3 headers are looked at,
/// to learn the IP version). Errors (drop and count): unsupported_gso_type (UDP GSO),
/// bad_gso, gso_not_negotiated (GSO type not requested, or no sg / checksum offload for it),
/// bad_checksum_offsets, truncated, unsupported_protocol (partial checksum on non-IP).
[[nodiscard]] Result<GuestRxOffload> map_tap_rx(const VirtioNetHdr& hdr, const FrontendOffloads& fe,
                                                std::span<const std::byte> head,
                                                std::size_t frame_len);

/// Completes a partial checksum in software over a frame held in several fragments: sums
/// bytes [csum_start, end) (the field holds the pseudo-header sum), and stores the inverted
/// result at csum_start + csum_offset (which may straddle two fragments). A result of 0 is
/// stored as 0xFFFF (RFC 768: 0 means "no checksum" for UDP; equivalent for TCP).
/// Error: bad_checksum_offsets when the field lies outside the frame.
[[nodiscard]] std::error_code complete_checksum(std::span<const std::span<std::byte>> frame,
                                                std::size_t csum_start, std::size_t csum_offset);

/// Reads a header from the first kVnetHdrLen bytes of `buf` (nullopt if shorter).
[[nodiscard]] std::optional<VirtioNetHdr> load_vnet_hdr(std::span<const std::byte> buf);

}  // namespace unetback::net
