// How the shim lays a TX frame out as a Linux-like slot chain (--tx-frags, issue 7's
// coalescing experiment, seed 003): a Linux sender's TCP/UDP skb reaches netfront as a small
// linear head holding only the protocol headers, then page fragments that start at arbitrary
// (often odd) offsets. Netback's RX coalescing sees those chains on the VM->VM path, and the
// legacy rule splits them where a full coalescer would not.
//
// The layout: slot 0 holds the frame's L2+L3+L4 headers (Ethernet/802.1Q, IPv4/IPv6 with
// extension headers, TCP with options or UDP; a frame that does not parse as IP gets its first
// 64 bytes), each further slot one payload piece of `frag_size` bytes (the last one shorter)
// at an odd offset in its own page, placed so that it still ends inside the page. Pure: no
// memory but the frame it reads, no ring.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/util/result.hpp"
#include "common/wire/netif.hpp"
#include "frontend-shim/netfront_types.hpp"

namespace unetback::shim {

/// Netback accepts at most XEN_NETIF_NR_SLOTS_MIN data slots per packet, the first included
/// (netif.h; more is a fatal error for Linux netback): a chain never goes beyond.
inline constexpr std::uint32_t kMaxTxFragSlots = wire::kNrSlotsMin;
/// The header slot's offset in its page: where Linux puts skb->data (NET_SKB_PAD + NET_IP_ALIGN
/// on architectures that align IP headers), so that slot is not page-aligned either.
inline constexpr std::uint16_t kTxFragHeaderOffset = 66;
/// Bytes in the header slot of a frame whose headers do not parse.
inline constexpr std::size_t kTxFragUnparsedHeaderLen = 64;

struct TxFragLayout {
  std::array<netfront::RawTxSlot, kMaxTxFragSlots> slots{};
  std::uint32_t count = 0;
  /// Slot 0's length; equal to the frame length when there is no payload.
  std::size_t header_len = 0;
  /// false when the headers did not parse and slot 0 holds the first 64 bytes instead.
  bool headers_parsed = false;

  [[nodiscard]] std::span<const netfront::RawTxSlot> span() const { return {slots.data(), count}; }
};

/// Where a payload piece of `size` bytes goes in its page: the largest odd offset that keeps
/// it inside the page (4096 - size, rounded down to odd; at least 1). A full page (4096) has
/// no odd placement and goes at offset 0.
[[nodiscard]] std::uint16_t tx_frag_offset(std::uint32_t size);

/// The slot chain for `frame` with payload pieces of `frag_size` bytes.
/// Errors: invalid_argument (frag_size outside 64..4096, or a frame shorter than an Ethernet
/// header), message_size (more than XEN_NETIF_MAX_TX_SIZE bytes), argument_list_too_long (the
/// chain would need more than kMaxTxFragSlots slots: send the frame in the normal layout).
[[nodiscard]] Result<TxFragLayout> plan_tx_frags(std::span<const std::byte> frame,
                                                 std::uint32_t frag_size);

}  // namespace unetback::shim
