// Guest-RX slot planning: how the bytes of one host->guest packet are laid into the
// frontend's posted 4 KiB buffers (Linux netback's rx.c; docs/design.md, "Guest RX").
//
// Full coalescing (Linux since 2015): the packet is packed into the fewest slots,
// ceil(len / 4096), whatever its fragment layout; each slot is filled to 4096 bytes with
// chunks that never cross a source page or the destination page. Each chunk becomes one
// grant-copy segment.
//
// Legacy (pre-2015 netback, kept for the side-by-side benchmark): a fragment piece that
// would overflow the current slot starts a new slot when the current slot already holds
// data and is not the head slot, so small/odd frags waste slot space and a packet can need
// more than 18 slots.
//
// XDP headroom (feature-xdp-headroom): the frontend asks for `headroom` free bytes before the
// packet in its first buffer (Linux netfront: XDP_PACKET_HEADROOM, 256), so slot 0 starts at
// that offset and holds that much less; the other slots start at 0. The response's offset
// field says where slot 0's data begins.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/hv/grant_table.hpp"

namespace unetback::vif {

enum class RxCoalesce : std::uint8_t { full, legacy };

/// One source fragment of a packet: local memory, or part of a page another domain granted
/// us (VM->VM; then offset + len <= 4096).
struct RxFrag {
  hv::GrantCopyPtr src;
  std::uint32_t len = 0;
};

/// A piece of the packet copied into one slot.
struct RxChunk {
  std::uint32_t slot = 0;      // data slot index within the packet (0 = head)
  std::uint16_t dest_off = 0;  // offset in that slot's page
  std::uint16_t len = 0;
  hv::GrantCopyPtr src;  // already advanced to the chunk's first byte
};

struct RxPlan {
  std::vector<RxChunk> chunks;
  std::vector<std::uint16_t> slot_bytes;  // bytes in each data slot (the response status)
  std::uint16_t first_offset = 0;         // where slot 0's data starts (the headroom)

  [[nodiscard]] std::uint32_t nr_slots() const {
    return static_cast<std::uint32_t>(slot_bytes.size());
  }
  void clear() {
    chunks.clear();
    slot_bytes.clear();
    first_offset = 0;
  }
};

/// The largest headroom that still leaves slot 0 room for data; RxPath never plans with
/// more (the xenbus side refuses a frontend asking for more: frontend_config.hpp).
inline constexpr std::uint32_t kMaxRxHeadroom = 4095;

/// Data slots a packet of `len` bytes needs when fully coalesced, slot 0 starting at
/// `headroom`.
[[nodiscard]] constexpr std::uint32_t rx_data_slots(std::uint32_t len, std::uint32_t headroom = 0) {
  return len == 0 ? 1 : (headroom + len + 4095) / 4096;
}

/// Plans `frags` into `plan` (cleared first; its vectors keep their capacity, so a queue
/// reusing one RxPlan allocates nothing per packet once warm). Slot 0's data starts at
/// `headroom` (at most kMaxRxHeadroom; more is taken as that).
void plan_rx_slots(std::span<const RxFrag> frags, RxCoalesce mode, RxPlan& plan,
                   std::uint32_t headroom = 0);

}  // namespace unetback::vif
