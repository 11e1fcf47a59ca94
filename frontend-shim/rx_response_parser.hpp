// Validation of one received packet's responses, with Linux xen-netfront's rules
// (xennet_get_responses, xennet_get_extras, xennet_set_skb_gso). The backend is not trusted
// (XSA-391/396 hardening): every response is checked, every bad packet is dropped with a
// counted reason, and the whole chain is always consumed so the ring stays in step.
//
// Layout (netif.h): data slot 0 at the packet's first ring index; if it has extra_info, the
// extras follow it (chained with XEN_NETIF_EXTRA_FLAG_MORE), overlaying responses; then the
// remaining data slots, chained by more_data. Pure: works on copies of the responses.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "common/wire/netif.hpp"

namespace unetback::netfront {

/// Netfront's RX_COPY_THRESHOLD: a first slot this small is pulled whole into the linear
/// area, which frees one frag, so one more slot is allowed.
inline constexpr std::int32_t kRxCopyThreshold = 256;
/// The most data slots any packet may use: XEN_NETIF_NR_SLOTS_MIN + 1.
inline constexpr std::uint32_t kMaxRxDataSlots = wire::kNrSlotsMin + 1;

/// Why a packet was dropped (each counted separately).
enum class RxDrop : std::uint8_t {
  none,
  bad_slot,         ///< status < 0 or offset + status > 4096
  too_many_slots,   ///< more than 18 (+1 for a first slot <= 256 bytes) data slots
  need_more_slots,  ///< more_data on the last published response
  missing_extra,    ///< extra_info on the last published response
  bad_extra_type,   ///< extra type NONE or >= XEN_NETIF_EXTRA_TYPE_MAX
  bad_gso,          ///< GSO extra with size 0 or a type other than TCPv4/TCPv6
  grant_in_use,     ///< the backend still holds the buffer's grant (the queue breaks)
  out_of_slot,      ///< rx_checks: a data response not at its request's slot (win-xenvif)
};
inline constexpr std::size_t kRxDropCount = 9;
[[nodiscard]] const char* rx_drop_name(RxDrop d);

/// The GSO extra of a received packet.
struct RxGso {
  wire::GsoType type = wire::GsoType::none;
  std::uint16_t size = 0;
  friend constexpr bool operator==(const RxGso&, const RxGso&) = default;
};

/// The HASH extra of a received packet (netif.h XEN_NETIF_EXTRA_TYPE_HASH).
struct RxHash {
  std::uint8_t type = 0;       ///< _XEN_NETIF_CTRL_HASH_TYPE_* (the bit number)
  std::uint8_t algorithm = 0;  ///< XEN_NETIF_CTRL_HASH_ALGORITHM_*
  std::uint32_t value = 0;
  friend constexpr bool operator==(const RxHash&, const RxHash&) = default;
};

/// Where one data slot's bytes are: `len` bytes at `offset` in the buffer of the response at
/// position `slot` of the span given to parse_rx_packet.
struct RxSegment {
  std::uint32_t slot = 0;
  std::uint16_t offset = 0;
  std::uint16_t len = 0;
};

struct RxParse {
  /// Responses the packet used, extras included: the caller consumes exactly these. 0 only
  /// for an empty span.
  std::uint32_t consumed = 0;
  std::uint32_t data_slots = 0;
  RxDrop drop = RxDrop::none;
  wire::RxFlags flags;  ///< of data slot 0
  std::optional<RxGso> gso;
  std::optional<RxHash> hash;
  std::array<RxSegment, kMaxRxDataSlots> segments{};
  std::uint32_t segment_count = 0;
  std::uint32_t bytes = 0;  ///< sum of the segments' lengths
};

/// Parses the packet at the start of `available` (the responses published and not yet
/// processed, in ring order).
[[nodiscard]] RxParse parse_rx_packet(std::span<const wire::RxResponse> available);

/// win-xenvif's slot rule for a parsed packet: every data response (slot 0 and those after
/// the extras, which overlay their ids) names the id of the request posted at its ring
/// index, id == index & (ring_size - 1), as netfront posts them. `first_index` is the ring
/// index of available[0]; `ring_size` a power of two.
[[nodiscard]] bool rx_responses_in_slot(std::span<const wire::RxResponse> available,
                                        const RxParse& p, std::uint32_t first_index,
                                        std::uint32_t ring_size);

/// win-xenvif's GSO rule: a packet with a GSO extra carries both csum_blank and
/// data_validated (a packet without one always passes).
[[nodiscard]] bool rx_gso_flags_ok(const RxParse& p);

}  // namespace unetback::netfront
