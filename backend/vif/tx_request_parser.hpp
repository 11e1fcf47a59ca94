// Guest-TX request chains: copies one packet's requests out of the TX ring (each exactly
// once) and applies Linux netback's validation rules (netback.c) to the copies.
//
// A packet on the TX ring is
//     first request [NETTXF_extra_info] -> extra_info* -> frag request* (NETTXF_more_data chain)
// where the first request's `size` is the packet's total length and every frag carries its
// own size. The parser never reads a ring slot twice and never reads past the requests the
// frontend has published (bounded by BackRing::unconsumed_requests()).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/ring/shared_ring.hpp"
#include "common/wire/netif.hpp"

namespace unetback::vif {

/// XEN_NETIF_NR_SLOTS_MIN: every backend accepts packets of up to 18 slots (first + frags);
/// longer ones are dropped.
inline constexpr std::uint32_t kMaxTxSlots = wire::kNrSlotsMin;
/// Linux fatal_skb_slots default: a frontend chaining this many slots is malicious.
inline constexpr std::uint32_t kDefaultFatalSkbSlots = 20;

/// One data slot of a TX packet, as copied out of the ring.
struct TxSlot {
  GrantRef gref;
  std::uint16_t offset = 0;
  std::uint16_t size = 0;  // this slot's own bytes (for the first slot: total - frags)
  std::uint16_t id = 0;
};

enum class TxVerdict : std::uint8_t {
  ok,     // a packet to deliver
  mcast,  // a dummy request carrying MCAST_ADD/DEL extras: answer it, deliver nothing
  drop,   // answer every consumed slot with an error, deliver nothing, vif stays up
  fatal,  // protocol violation: disable the vif (from the event loop, XSA-90)
};

enum class TxError : std::uint8_t {
  none,
  // drop reasons (guest bugs: counted and rate-limit logged)
  too_many_slots,         // more than kMaxTxSlots slots in total
  frag_larger_than_rest,  // a frag's size exceeds what the first request's total leaves
  runt_first_slot,        // first slot < 14 bytes (ETH_HLEN)
  bad_gso,                // GSO extra with size 0 or an unknown type
  // fatal reasons (a malicious or broken frontend)
  chain_past_available,  // the more_data chain runs past the published requests
  fatal_slot_count,      // total slots >= fatal_skb_slots
  slot_crosses_page,     // offset + size > 4096
  missing_extra,         // an extra_info promised but not published
  bad_extra_type,        // extra type 0 or >= XEN_NETIF_EXTRA_TYPE_MAX
};

[[nodiscard]] std::string_view tx_error_name(TxError e);

struct TxGso {
  wire::GsoType type = wire::GsoType::none;
  std::uint16_t size = 0;
};

struct TxMcast {
  bool add = false;
  std::array<std::uint8_t, 6> addr{};
};

/// Upper bound for the fatal_skb_slots tunable (sizes the per-packet scratch arrays for the
/// worst case, XSA-432).
inline constexpr std::uint32_t kMaxFatalSkbSlots = 64;

/// One packet's requests, copied out of the ring.
struct TxPacket {
  TxVerdict verdict = TxVerdict::ok;
  TxError error = TxError::none;
  wire::TxFlags flags;          // the first request's flags
  std::uint32_t total_len = 0;  // the first request's size field
  std::uint16_t first_id = 0;   // the first request's id
  std::uint32_t nr_extras = 0;  // extra_info slots consumed (each gets a NULL response)
  std::uint32_t nr_frags = 0;   // frag requests consumed after the first (and extras)
  /// The ids of the consumed frag requests, in ring order (also for drops: each gets an
  /// error response).
  std::array<std::uint16_t, kMaxFatalSkbSlots> frag_ids{};
  /// The data slots (first + frags) for verdict `ok`; nr_slots = 1 + nr_frags then.
  std::array<TxSlot, kMaxTxSlots> slots{};
  std::uint32_t nr_slots = 0;
  std::optional<TxGso> gso;
  std::optional<TxMcast> mcast;
  /// The ring index of the first request (its ring_slots() follow it), for the vif's record.
  RingIdx first_index{};

  /// Ring slots consumed: the first request, its extras and its frags.
  [[nodiscard]] std::uint32_t ring_slots() const { return 1 + nr_extras + nr_frags; }
};

struct TxParseLimits {
  std::uint32_t fatal_skb_slots = kDefaultFatalSkbSlots;  // clamped to [19, kMaxFatalSkbSlots]
};

/// Takes one packet off `ring` (which must have at least one unconsumed request) and
/// validates it. On `fatal` the ring position is unspecified: the vif is going down.
[[nodiscard]] TxPacket parse_tx_packet(ring::TxBackRing& ring, const TxParseLimits& limits);

}  // namespace unetback::vif
