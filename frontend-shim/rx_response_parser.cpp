#include "frontend-shim/rx_response_parser.hpp"

#include <cstring>

namespace unetback::netfront {

const char* rx_drop_name(RxDrop d) {
  switch (d) {
    case RxDrop::none: return "none";
    case RxDrop::bad_slot: return "bad_slot";
    case RxDrop::too_many_slots: return "too_many_slots";
    case RxDrop::need_more_slots: return "need_more_slots";
    case RxDrop::missing_extra: return "missing_extra";
    case RxDrop::bad_extra_type: return "bad_extra_type";
    case RxDrop::bad_gso: return "bad_gso";
    case RxDrop::grant_in_use: return "grant_in_use";
    case RxDrop::out_of_slot: return "out_of_slot";
  }
  return "?";
}

namespace {

void note(RxParse& p, RxDrop why) {
  if (p.drop == RxDrop::none) p.drop = why;  // the first problem names the drop
}

}  // namespace

RxParse parse_rx_packet(std::span<const wire::RxResponse> available) {
  RxParse p;
  if (available.empty()) return p;
  const wire::RxResponse& first = available[0];
  p.flags = wire::rx_flags(first);
  // xennet_get_responses: a small first slot is pulled into the linear area, which leaves
  // one more frag for the rest.
  const std::uint32_t max_slots =
      wire::kNrSlotsMin + (static_cast<std::int32_t>(first.status) <= kRxCopyThreshold ? 1 : 0);

  // Extras overlay the responses right after data slot 0.
  std::uint32_t last = 0;  // position of the last response looked at
  if (p.flags.has(wire::RxFlag::extra_info)) {
    for (;;) {
      if (last + 1 == available.size()) {
        note(p, RxDrop::missing_extra);
        break;
      }
      ++last;
      wire::ExtraInfo extra;
      static_assert(sizeof(extra) <= sizeof(wire::RxResponse));
      std::memcpy(&extra, &available[last], sizeof(extra));
      if (extra.type == 0 || extra.type >= wire::kExtraTypeMax) {
        note(p, RxDrop::bad_extra_type);
      } else if (extra.type == static_cast<std::uint8_t>(wire::ExtraType::gso)) {
        p.gso = RxGso{static_cast<wire::GsoType>(extra.u.gso.type), extra.u.gso.size};
      } else if (extra.type == static_cast<std::uint8_t>(wire::ExtraType::hash)) {
        RxHash h;
        h.type = extra.u.hash.type;
        h.algorithm = extra.u.hash.algorithm;
        std::memcpy(&h.value, extra.u.hash.value, sizeof(h.value));
        p.hash = h;
      }
      if (!wire::extra_flags(extra).has(wire::ExtraFlag::more)) break;
    }
  }

  // Data slots: 0 at position 0, k >= 1 at last + k. The chain is walked to its end even
  // after an error, so the whole packet is consumed.
  std::uint32_t slots = 1;
  std::uint32_t pos = 0;
  for (;;) {
    const wire::RxResponse& r = available[pos];
    const std::int32_t status = r.status;
    if (status < 0 || static_cast<std::uint32_t>(r.offset) + static_cast<std::uint32_t>(status) >
                          wire::kPageSize) {
      note(p, RxDrop::bad_slot);
    } else if (p.segment_count < p.segments.size()) {
      p.segments[p.segment_count++] = RxSegment{pos, r.offset, static_cast<std::uint16_t>(status)};
      p.bytes += static_cast<std::uint32_t>(status);
    }
    if (!wire::rx_flags(r).has(wire::RxFlag::more_data)) break;
    if (last + slots == available.size()) {
      note(p, RxDrop::need_more_slots);
      break;
    }
    pos = last + slots;
    ++slots;
  }
  p.data_slots = slots;
  p.consumed = last + slots;
  if (slots > max_slots) p.drop = RxDrop::too_many_slots;  // Linux reports this one last

  if (p.drop == RxDrop::none && p.gso) {
    if (p.gso->size == 0 ||
        (p.gso->type != wire::GsoType::tcpv4 && p.gso->type != wire::GsoType::tcpv6))
      p.drop = RxDrop::bad_gso;
  }
  return p;
}

bool rx_responses_in_slot(std::span<const wire::RxResponse> available, const RxParse& p,
                          std::uint32_t first_index, std::uint32_t ring_size) {
  if (p.consumed == 0 || p.consumed > available.size() || p.data_slots > p.consumed) return false;
  const std::uint32_t extras = p.consumed - p.data_slots;
  auto in_slot = [&](std::uint32_t pos) {
    return available[pos].id == ((first_index + pos) & (ring_size - 1));
  };
  if (!in_slot(0)) return false;
  for (std::uint32_t pos = extras + 1; pos < p.consumed; ++pos)
    if (!in_slot(pos)) return false;
  return true;
}

bool rx_gso_flags_ok(const RxParse& p) {
  return !p.gso ||
         (p.flags.has(wire::RxFlag::csum_blank) && p.flags.has(wire::RxFlag::data_validated));
}

}  // namespace unetback::netfront
