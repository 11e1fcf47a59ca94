#include "backend/vif/tx_request_parser.hpp"

#include <algorithm>

namespace unetback::vif {

std::string_view tx_error_name(TxError e) {
  switch (e) {
    case TxError::none: return "none";
    case TxError::too_many_slots: return "too many slots";
    case TxError::frag_larger_than_rest: return "frag larger than the rest of the packet";
    case TxError::runt_first_slot: return "first slot shorter than an Ethernet header";
    case TxError::bad_gso: return "bad GSO extra";
    case TxError::chain_past_available: return "slot chain runs past the published requests";
    case TxError::fatal_slot_count: return "malicious number of slots";
    case TxError::slot_crosses_page: return "slot crosses a page boundary";
    case TxError::missing_extra: return "missing extra info";
    case TxError::bad_extra_type: return "invalid extra info type";
  }
  return "?";
}

namespace {

TxPacket fatal(TxPacket p, TxError e) {
  p.verdict = TxVerdict::fatal;
  p.error = e;
  return p;
}

}  // namespace

TxPacket parse_tx_packet(ring::TxBackRing& ring, const TxParseLimits& limits) {
  const std::uint32_t fatal_slots =
      std::clamp(limits.fatal_skb_slots, kMaxTxSlots + 1, kMaxFatalSkbSlots);
  TxPacket p;
  // Everything we may look at, fixed now: later req_prod movement is seen on the next pass.
  std::uint32_t work = ring.unconsumed_requests();
  if (work == 0) return fatal(p, TxError::chain_past_available);

  const wire::TxRequest first = ring.take_request();
  --work;
  p.flags = wire::tx_flags(first);
  p.total_len = first.size;
  p.first_id = first.id;

  // Extras: as many as the MORE flags chain, each copied once and type-checked.
  if (p.flags.has(wire::TxFlag::extra_info)) {
    bool more = true;
    while (more) {
      if (work == 0) return fatal(p, TxError::missing_extra);
      const auto extra = ring.take_request_as<wire::ExtraInfo>();
      --work;
      ++p.nr_extras;
      if (extra.type == XEN_NETIF_EXTRA_TYPE_NONE || extra.type >= wire::kExtraTypeMax)
        return fatal(p, TxError::bad_extra_type);
      switch (static_cast<wire::ExtraType>(extra.type)) {
        case wire::ExtraType::gso:
          p.gso = TxGso{static_cast<wire::GsoType>(extra.u.gso.type), extra.u.gso.size};
          break;
        case wire::ExtraType::mcast_add:
        case wire::ExtraType::mcast_del: {
          TxMcast m;
          m.add = extra.type == XEN_NETIF_EXTRA_TYPE_MCAST_ADD;
          std::copy(std::begin(extra.u.mcast.addr), std::end(extra.u.mcast.addr), m.addr.begin());
          p.mcast = m;
          break;
        }
        case wire::ExtraType::hash:  // a frontend's hash is advisory; we compute our own
        case wire::ExtraType::none: break;
      }
      more = wire::extra_flags(extra).has(wire::ExtraFlag::more);
    }
  }

  // A multicast-control request is a dummy: netback answers it at once and reads no frags.
  if (p.mcast) {
    p.verdict = TxVerdict::mcast;
    return p;
  }

  // The more_data chain (netback's xenvif_count_requests). `first_size` becomes the first
  // slot's own size: the total minus every frag.
  std::uint32_t first_size = first.size;
  bool more = p.flags.has(wire::TxFlag::more_data);
  while (more) {
    if (p.nr_frags >= work) return fatal(p, TxError::chain_past_available);
    // Slot counts are totals (first + frags), as docs/design.md states them: reading this frag
    // makes it nr_frags + 2. (Linux counts frags only and so takes one frag more.)
    const std::uint32_t total_after = p.nr_frags + 2;
    if (total_after >= fatal_slots) return fatal(p, TxError::fatal_slot_count);
    if (p.error == TxError::none && total_after > kMaxTxSlots) {
      // One more slot than the 18 every backend must accept: drop, but keep walking the
      // chain so that every slot gets its error response.
      p.verdict = TxVerdict::drop;
      p.error = TxError::too_many_slots;
    }
    const wire::TxRequest frag = ring.take_request();
    p.frag_ids[p.nr_frags] = frag.id;
    if (p.error == TxError::none && frag.size > first_size) {
      // Not fatal: buggy frontends overflow the 16-bit total of >= 64 KiB packets.
      p.verdict = TxVerdict::drop;
      p.error = TxError::frag_larger_than_rest;
    }
    if (p.error == TxError::none) {
      p.slots[1 + p.nr_frags] = TxSlot{GrantRef{frag.gref}, frag.offset, frag.size, frag.id};
    }
    first_size -= std::min<std::uint32_t>(frag.size, first_size);
    ++p.nr_frags;
    if (static_cast<std::uint32_t>(frag.offset) + frag.size > wire::kPageSize)
      return fatal(p, TxError::slot_crosses_page);
    more = wire::tx_flags(frag).has(wire::TxFlag::more_data);
  }
  if (p.verdict == TxVerdict::drop) return p;

  if (first_size < wire::kEthHeaderLen) {
    p.verdict = TxVerdict::drop;
    p.error = TxError::runt_first_slot;
    return p;
  }
  if (static_cast<std::uint32_t>(first.offset) + first_size > wire::kPageSize)
    return fatal(p, TxError::slot_crosses_page);
  if (p.gso && (p.gso->size == 0 ||
                (p.gso->type != wire::GsoType::tcpv4 && p.gso->type != wire::GsoType::tcpv6))) {
    p.verdict = TxVerdict::drop;
    p.error = TxError::bad_gso;
    return p;
  }
  p.slots[0] =
      TxSlot{GrantRef{first.gref}, first.offset, static_cast<std::uint16_t>(first_size), first.id};
  p.nr_slots = 1 + p.nr_frags;
  return p;
}

}  // namespace unetback::vif
