// How a frontend lays one TX frame out over netif slots, the way Linux xen-netfront does
// (xennet_start_xmit / xennet_make_txreqs): the first slot starts where the frame's data
// starts in its page and runs to the page end; every further slot is one page (the last one
// shorter). Pure: no memory, no ring.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/util/result.hpp"
#include "common/wire/netif.hpp"

namespace unetback::netfront {

/// Netfront stops its TX queue when fewer than this many ring slots are free: the largest
/// packet it may send (XEN_NETIF_NR_SLOTS_MIN data slots) plus one GSO extra.
inline constexpr std::uint32_t kTxStopThreshold = wire::kNrSlotsMin + 1;
/// Data slots one frame of at most 0xFFFF bytes can need: 16 full pages plus a partial
/// page at each end when the data does not start on a page boundary.
inline constexpr std::uint32_t kMaxTxDataSlots = 17;
static_assert(kMaxTxDataSlots <= wire::kNrSlotsMin);

/// One slot: `size` bytes at `offset` in one page.
struct TxSlot {
  std::uint16_t offset = 0;
  std::uint16_t size = 0;
  friend constexpr bool operator==(const TxSlot&, const TxSlot&) = default;
};

struct TxSlotPlan {
  std::array<TxSlot, kMaxTxDataSlots> slots{};
  std::uint32_t count = 0;
  /// The frame's data could not start at the requested offset (its first slot would have
  /// held fewer than ETH_HLEN bytes, or a non-SG frame would have crossed a page): it starts
  /// at offset 0 of a fresh page instead, as Linux bounces such an skb into a new one.
  bool bounced = false;
};

/// The slots for a frame of `len` bytes whose first byte sits at `first_offset` in its
/// page. Without `sg` the frame must fit one slot. Errors: invalid_argument for a frame
/// shorter than an Ethernet header (the first request must hold >= 14 bytes) or an offset
/// outside the page; message_size for more than XEN_NETIF_MAX_TX_SIZE (0xFFFF) bytes, or
/// more than a page without `sg`.
[[nodiscard]] Result<TxSlotPlan> plan_tx_slots(std::size_t len, std::size_t first_offset, bool sg);

}  // namespace unetback::netfront
