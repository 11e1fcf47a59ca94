// Fuzz target: guest-TX request chains (backend/vif/tx_request_parser).
//
// The input is a hostile frontend's TX ring: the ring's start index, how many requests it
// claims to have published (possibly more than the ring holds), the fatal_skb_slots tunable
// and the raw bytes of the 256 entries. Packets are parsed until the ring is exhausted or a
// verdict is fatal, and every verdict is checked against the requests actually in the ring:
//  * the parser consumes exactly ring_slots() requests and never more than were published;
//  * an accepted packet is 1 + nr_frags slots (<= 18), its slot sizes add up to the first
//    request's total, every slot satisfies offset + size <= 4096, the first slot holds an
//    Ethernet header, and slots/extras are the ring's own requests in ring order;
//  * errors are of the verdict's class (drop reasons for drop, fatal reasons for fatal).
#include <algorithm>
#include <array>
#include <cstring>
#include <fuzzer/FuzzedDataProvider.h>

#include "backend/vif/tx_request_parser.hpp"
#include "fuzz/fuzz_check.hpp"

namespace {

using namespace unetback;
using vif::TxError;
using vif::TxVerdict;

struct alignas(4096) Page {
  std::byte bytes[4096];
};

bool is_drop_reason(TxError e) {
  return e == TxError::too_many_slots || e == TxError::frag_larger_than_rest ||
         e == TxError::runt_first_slot || e == TxError::bad_gso;
}
bool is_fatal_reason(TxError e) {
  return e == TxError::chain_past_available || e == TxError::fatal_slot_count ||
         e == TxError::slot_crosses_page || e == TxError::missing_extra ||
         e == TxError::bad_extra_type;
}

/// The raw request at ring index `i`, read independently of the parser.
wire::TxRequest request_at(const Page& page, std::uint32_t i) {
  wire::TxRequest r;
  std::memcpy(&r, page.bytes + ring::kRingHeaderSize + (i & 255) * sizeof(netif_tx_sring_entry),
              sizeof(r));
  return r;
}

void check_packet(const Page& page, std::uint32_t first_idx, std::uint32_t work,
                  const vif::TxPacket& p, std::uint32_t consumed) {
  FUZZ_CHECK(consumed <= work);  // never reads past the published requests
  FUZZ_CHECK(vif::tx_error_name(p.error) != "?");
  if (p.verdict == TxVerdict::fatal) {
    FUZZ_CHECK(is_fatal_reason(p.error));
    return;
  }
  FUZZ_CHECK(consumed == p.ring_slots());
  const wire::TxRequest first = request_at(page, first_idx);
  FUZZ_CHECK(p.total_len == first.size);
  FUZZ_CHECK(p.first_id == first.id);
  FUZZ_CHECK(p.flags.raw() == first.flags);
  FUZZ_CHECK(p.nr_frags < vif::kMaxFatalSkbSlots);
  // The frag ids are the requests after the first and its extras, in ring order.
  for (std::uint32_t f = 0; f < p.nr_frags; ++f)
    FUZZ_CHECK(p.frag_ids[f] == request_at(page, first_idx + 1 + p.nr_extras + f).id);

  switch (p.verdict) {
    case TxVerdict::mcast:
      FUZZ_CHECK(p.error == TxError::none);
      FUZZ_CHECK(p.mcast.has_value());
      FUZZ_CHECK(p.nr_frags == 0);
      FUZZ_CHECK(p.nr_extras >= 1);
      break;
    case TxVerdict::drop:
      FUZZ_CHECK(is_drop_reason(p.error));
      FUZZ_CHECK(!p.mcast.has_value());
      break;
    case TxVerdict::ok: {
      FUZZ_CHECK(p.error == TxError::none);
      FUZZ_CHECK(!p.mcast.has_value());
      FUZZ_CHECK(p.nr_slots == 1 + p.nr_frags);
      FUZZ_CHECK(p.nr_slots <= vif::kMaxTxSlots);
      std::uint32_t sum = 0;
      for (std::uint32_t s = 0; s < p.nr_slots; ++s) {
        const vif::TxSlot& slot = p.slots[s];
        FUZZ_CHECK(static_cast<std::uint32_t>(slot.offset) + slot.size <= 4096);
        sum += slot.size;
        const std::uint32_t idx = s == 0 ? first_idx : first_idx + p.nr_extras + s;
        const wire::TxRequest r = request_at(page, idx);
        FUZZ_CHECK(slot.gref == GrantRef{r.gref});
        FUZZ_CHECK(slot.offset == r.offset);
        FUZZ_CHECK(slot.id == r.id);
        if (s != 0) FUZZ_CHECK(slot.size == r.size);
        // more_data chains exactly the frags: set on all but the last data slot.
        FUZZ_CHECK(((r.flags & NETTXF_more_data) != 0) == (s + 1 < p.nr_slots));
      }
      FUZZ_CHECK(sum == p.total_len);  // the first slot's own size is total - frags
      FUZZ_CHECK(p.slots[0].size >= wire::kEthHeaderLen);
      if (p.gso) {
        FUZZ_CHECK(p.gso->size != 0);
        FUZZ_CHECK(p.gso->type == wire::GsoType::tcpv4 || p.gso->type == wire::GsoType::tcpv6);
      }
      FUZZ_CHECK(((first.flags & NETTXF_extra_info) != 0) == (p.nr_extras != 0));
      break;
    }
    case TxVerdict::fatal: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  static Page page;
  std::memset(page.bytes, 0, sizeof(page.bytes));

  // Starting near 2^32 exercises index wrap-around.
  const auto start = in.ConsumeBool() ? 0xFFFFFF00u + in.ConsumeIntegral<std::uint8_t>()
                                      : in.ConsumeIntegral<std::uint8_t>();
  // A hostile frontend may claim more requests than the ring holds.
  const auto published = in.ConsumeIntegralInRange<std::uint32_t>(0, 300);
  vif::TxParseLimits limits;
  limits.fatal_skb_slots = in.ConsumeIntegralInRange<std::uint32_t>(0, 80);

  auto front = ring::TxFrontRing::init(page.bytes, RingIdx{start});
  (void)front;
  const auto entries = in.ConsumeRemainingBytes<std::uint8_t>();
  if (!entries.empty()) {
    std::memcpy(page.bytes + ring::kRingHeaderSize, entries.data(),
                std::min<std::size_t>(entries.size(), 4096 - ring::kRingHeaderSize));
  }
  // req_prod as the frontend would publish it.
  const std::uint32_t req_prod = start + published;
  std::memcpy(page.bytes + offsetof(ring::SharedRingHeader, req_prod), &req_prod, 4);

  auto back = ring::TxBackRing::attach(page.bytes);
  if (!back) {
    FUZZ_CHECK(published > ring::TxBackRing::kSize);  // refused only when impossible
    return 0;
  }
  FUZZ_CHECK(published <= ring::TxBackRing::kSize);
  std::uint32_t total_consumed = 0;
  while (back->unconsumed_requests() > 0) {
    const std::uint32_t work = back->unconsumed_requests();
    const std::uint32_t first_idx = back->req_cons().value();
    const vif::TxPacket p = vif::parse_tx_packet(*back, limits);
    const std::uint32_t consumed = back->req_cons().value() - first_idx;
    check_packet(page, first_idx, work, p, consumed);
    total_consumed += consumed;
    FUZZ_CHECK(total_consumed <= published);
    if (p.verdict == TxVerdict::fatal) break;
  }
  return 0;
}
