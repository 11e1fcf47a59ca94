#include "frontend-shim/tx_slot_plan.hpp"

#include <algorithm>

namespace unetback::netfront {

Result<TxSlotPlan> plan_tx_slots(std::size_t len, std::size_t first_offset, bool sg) {
  constexpr std::size_t kPage = wire::kPageSize;
  if (len < wire::kEthHeaderLen || first_offset >= kPage) return std::errc::invalid_argument;
  // XEN_NETIF_MAX_TX_SIZE: the first request's 16-bit size carries the whole length.
  if (len > wire::kMaxTxSize) return std::errc::message_size;
  if (!sg && len > kPage) return std::errc::message_size;

  TxSlotPlan plan;
  std::size_t offset = first_offset;
  // Netfront bounces a head that would leave fewer than ETH_HLEN bytes in the first slot
  // (backends drop a first slot < 14 bytes), and without SG a frame crossing a page.
  if (offset + wire::kEthHeaderLen > kPage || (!sg && offset + len > kPage)) {
    offset = 0;
    plan.bounced = true;
  }
  std::size_t left = len;
  while (left > 0) {
    const std::size_t n = std::min(left, kPage - offset);
    plan.slots[plan.count++] =
        TxSlot{static_cast<std::uint16_t>(offset), static_cast<std::uint16_t>(n)};
    left -= n;
    offset = 0;
  }
  return plan;
}

}  // namespace unetback::netfront
