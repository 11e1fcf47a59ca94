// Fuzz target: guest-RX slot planning (backend/vif/rx_slot_planner).
//
// Arbitrary fragment layouts — local buffers at any address and alignment, foreign pages at
// any offset — are planned in both coalescing modes. The plan must
//  * cover the packet exactly: chunk lengths add up to every fragment's length, in order,
//    each chunk starting where the previous one of its fragment ended;
//  * respect both pages: dest_off + len <= 4096 in the slot, and no chunk crosses a source
//    page (a local page boundary, or the end of a foreign page);
//  * fill slots contiguously from offset 0 (slot 0 from the XDP headroom), slot_bytes[s]
//    being the bytes planned into s;
//  * use ceil((headroom + len) / 4096) slots when fully coalesced (every slot but the last
//    full), and
//    never leave a slot empty (except the single slot of an empty packet).
#include <fuzzer/FuzzedDataProvider.h>
#include <vector>

#include "backend/vif/rx_slot_planner.hpp"
#include "fuzz/fuzz_check.hpp"

namespace {

using namespace unetback;

std::uintptr_t addr_of(const hv::GrantCopyPtr& p) {
  return reinterpret_cast<std::uintptr_t>(p.virt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto mode = in.ConsumeBool() ? vif::RxCoalesce::legacy : vif::RxCoalesce::full;
  // feature-xdp-headroom: none (most frontends) or any value the xenbus side accepts.
  const std::uint32_t headroom =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint32_t>(0, vif::kMaxRxHeadroom) : 0;
  const auto nr_frags = in.ConsumeIntegralInRange<std::size_t>(0, 40);
  std::vector<vif::RxFrag> frags;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < nr_frags && in.remaining_bytes() > 0; ++i) {
    vif::RxFrag f;
    if (in.ConsumeBool()) {
      // A page another domain granted: offset + len <= 4096 (the planner's precondition).
      const auto off = in.ConsumeIntegralInRange<std::uint16_t>(0, 4096);
      f.src = hv::GrantCopyPtr::granted(DomId{3}, GrantRef{static_cast<std::uint32_t>(i)}, off);
      f.len = in.ConsumeIntegralInRange<std::uint32_t>(0, 4096u - off);
    } else {
      // Local memory is never dereferenced by the planner: any address will do.
      const auto addr = in.ConsumeIntegralInRange<std::uintptr_t>(0x10000, 0x7fff'ffff'0000);
      f.src = hv::GrantCopyPtr::local(reinterpret_cast<void*>(addr));
      f.len = in.ConsumeIntegralInRange<std::uint32_t>(0, 70000);
    }
    total += f.len;
    frags.push_back(f);
  }

  vif::RxPlan plan;
  // Reuse across calls must not leak state: plan twice into the same object.
  plan.chunks.push_back(vif::RxChunk{7, 1, 1, {}});
  vif::plan_rx_slots(frags, mode, plan, headroom);

  FUZZ_CHECK(plan.nr_slots() >= 1);
  FUZZ_CHECK(plan.first_offset == headroom);
  std::vector<std::uint32_t> filled(plan.nr_slots(), 0);
  filled[0] = headroom;
  std::size_t c = 0;
  std::uint32_t last_slot = 0;
  for (const vif::RxFrag& f : frags) {
    hv::GrantCopyPtr expect = f.src;
    std::uint32_t left = f.len;
    while (left > 0) {
      FUZZ_CHECK(c < plan.chunks.size());
      const vif::RxChunk& ch = plan.chunks[c++];
      FUZZ_CHECK(ch.len > 0 && ch.len <= left);
      FUZZ_CHECK(ch.slot < plan.nr_slots());
      FUZZ_CHECK(ch.slot == last_slot || ch.slot == last_slot + 1);  // slots in order
      last_slot = ch.slot;
      FUZZ_CHECK(ch.dest_off == filled[ch.slot]);  // contiguous from the slot's start
      FUZZ_CHECK(static_cast<std::uint32_t>(ch.dest_off) + ch.len <= 4096);
      filled[ch.slot] += ch.len;
      FUZZ_CHECK(ch.src.foreign == expect.foreign);
      if (expect.foreign) {
        FUZZ_CHECK(ch.src.ref == expect.ref && ch.src.domid == expect.domid);
        FUZZ_CHECK(ch.src.offset == expect.offset);
        FUZZ_CHECK(static_cast<std::uint32_t>(ch.src.offset) + ch.len <= 4096);
        expect.offset = static_cast<std::uint16_t>(expect.offset + ch.len);
      } else {
        FUZZ_CHECK(addr_of(ch.src) == addr_of(expect));
        FUZZ_CHECK((addr_of(ch.src) & 4095) + ch.len <= 4096);  // within one source page
        expect.virt = static_cast<std::byte*>(expect.virt) + ch.len;
      }
      left -= ch.len;
    }
  }
  FUZZ_CHECK(c == plan.chunks.size());  // no chunk beyond the fragments

  std::uint64_t planned = 0;
  for (std::uint32_t s = 0; s < plan.nr_slots(); ++s) {
    const std::uint32_t start = s == 0 ? headroom : 0;
    FUZZ_CHECK(plan.slot_bytes[s] == filled[s] - start);
    FUZZ_CHECK(filled[s] <= 4096);
    if (total > 0) FUZZ_CHECK(filled[s] > start);  // no empty slot
    planned += filled[s] - start;
  }
  FUZZ_CHECK(planned == total);
  if (mode == vif::RxCoalesce::full) {
    FUZZ_CHECK(plan.nr_slots() == vif::rx_data_slots(static_cast<std::uint32_t>(total), headroom));
    for (std::uint32_t s = 0; s + 1 < plan.nr_slots(); ++s) FUZZ_CHECK(filled[s] == 4096);
  } else {
    FUZZ_CHECK(plan.nr_slots() >= vif::rx_data_slots(static_cast<std::uint32_t>(total), headroom));
  }
  return 0;
}
