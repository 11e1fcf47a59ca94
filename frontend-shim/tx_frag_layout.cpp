#include "frontend-shim/tx_frag_layout.hpp"

#include <algorithm>

#include "common/net/frame.hpp"
#include "frontend-shim/shim_options.hpp"

namespace unetback::shim {

namespace {

constexpr std::uint32_t kPage = wire::kPageSize;

/// Slot 0's length: the headers as parsed, or the first 64 bytes of a frame that is not IP
/// (or whose headers are malformed). Never shorter than an Ethernet header (netback drops a
/// first slot below ETH_HLEN), never past the frame, and never past the header slot's page
/// (IPv6 extension headers can, in theory, run for kilobytes).
std::size_t header_slot_len(std::span<const std::byte> frame, bool& parsed) {
  auto info = net::parse_headers(frame);
  parsed = info && (info->is_ipv4() || info->is_ipv6());
  const std::size_t len = parsed ? info->headers_len() : kTxFragUnparsedHeaderLen;
  const std::size_t room = kPage - kTxFragHeaderOffset;
  return std::min({std::max<std::size_t>(len, wire::kEthHeaderLen), frame.size(), room});
}

}  // namespace

std::uint16_t tx_frag_offset(std::uint32_t size) {
  if (size >= kPage) return 0;
  std::uint32_t offset = kPage - size;
  if (offset % 2 == 0) --offset;  // round down to odd; offset >= 2 here, so the result >= 1
  return static_cast<std::uint16_t>(offset);
}

Result<TxFragLayout> plan_tx_frags(std::span<const std::byte> frame, std::uint32_t frag_size) {
  if (frag_size < kTxFragMin || frag_size > kTxFragMax || frame.size() < wire::kEthHeaderLen)
    return std::errc::invalid_argument;
  // XEN_NETIF_MAX_TX_SIZE: the first request's 16-bit size carries the whole length.
  if (frame.size() > wire::kMaxTxSize) return std::errc::message_size;

  TxFragLayout layout;
  layout.header_len = header_slot_len(frame, layout.headers_parsed);
  const std::size_t payload = frame.size() - layout.header_len;
  const std::size_t pieces = (payload + frag_size - 1) / frag_size;
  if (1 + pieces > kMaxTxFragSlots) return std::errc::argument_list_too_long;

  layout.slots[0] = {kTxFragHeaderOffset, static_cast<std::uint16_t>(layout.header_len)};
  layout.count = 1;
  for (std::size_t left = payload; left > 0;) {
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(left, frag_size));
    layout.slots[layout.count++] = {tx_frag_offset(n), static_cast<std::uint16_t>(n)};
    left -= n;
  }
  return layout;
}

}  // namespace unetback::shim
