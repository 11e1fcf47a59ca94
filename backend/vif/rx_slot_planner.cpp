#include "backend/vif/rx_slot_planner.hpp"

#include <algorithm>
#include <cstddef>

namespace unetback::vif {
namespace {

constexpr std::uint32_t kPage = static_cast<std::uint32_t>(hv::kPageSize);

/// Bytes left in the source page from the pointer's current position.
std::uint32_t src_page_room(const hv::GrantCopyPtr& p) {
  if (p.foreign) return kPage - p.offset;
  const auto addr = reinterpret_cast<std::uintptr_t>(p.virt);
  return kPage - static_cast<std::uint32_t>(addr & (kPage - 1));
}

hv::GrantCopyPtr advance(hv::GrantCopyPtr p, std::uint32_t n) {
  if (p.foreign) {
    p.offset = static_cast<std::uint16_t>(p.offset + n);
  } else {
    p.virt = static_cast<std::byte*>(p.virt) + n;
  }
  return p;
}

}  // namespace

void plan_rx_slots(std::span<const RxFrag> frags, RxCoalesce mode, RxPlan& plan,
                   std::uint32_t headroom) {
  plan.clear();
  std::uint32_t slot = 0;
  // netback's xenvif_rx_data_slot(): the first slot is filled from the XDP headroom on.
  std::uint32_t dest_off = std::min(headroom, kMaxRxHeadroom);
  plan.first_offset = static_cast<std::uint16_t>(dest_off);
  plan.slot_bytes.push_back(0);

  for (const RxFrag& frag : frags) {
    hv::GrantCopyPtr src = frag.src;
    std::uint32_t left = frag.len;
    while (left > 0) {
      // The piece of this frag that lies in one source page.
      const std::uint32_t piece = std::min(left, src_page_room(src));
      bool new_slot = dest_off == kPage;
      if (mode == RxCoalesce::legacy && !new_slot) {
        // Pre-2015 start_new_rx_buffer(): move on rather than split a piece that would
        // fit whole in a fresh buffer, except in the head slot.
        new_slot = dest_off + piece > kPage && piece <= kPage && dest_off > 0 && slot > 0;
      }
      if (new_slot) {
        ++slot;
        dest_off = 0;
        plan.slot_bytes.push_back(0);
      }
      const std::uint32_t len = std::min(piece, kPage - dest_off);
      plan.chunks.push_back(RxChunk{slot, static_cast<std::uint16_t>(dest_off),
                                    static_cast<std::uint16_t>(len), src});
      plan.slot_bytes[slot] = static_cast<std::uint16_t>(plan.slot_bytes[slot] + len);
      dest_off += len;
      src = advance(src, len);
      left -= len;
    }
  }
}

}  // namespace unetback::vif
