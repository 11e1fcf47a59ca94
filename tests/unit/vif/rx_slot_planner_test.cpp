// Guest-RX slot planning: full coalescing packs every packet into ceil(len/4096) slots with
// chunks that never cross a page on either side; the legacy rule wastes slots.
#include "backend/vif/rx_slot_planner.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <random>
#include <vector>

namespace unetback::vif {
namespace {

constexpr std::uint32_t kPage = 4096;

struct alignas(4096) Buffer {
  std::byte bytes[20 * 4096];
};

/// Checks the invariants every plan must keep and returns the bytes it covers.
std::uint64_t check_plan(const RxPlan& plan) {
  std::uint64_t total = 0;
  // Slot 0 starts after the XDP headroom, the others at 0.
  std::vector<std::uint32_t> fill(plan.nr_slots(), 0);
  if (!fill.empty()) fill[0] = plan.first_offset;
  for (const RxChunk& c : plan.chunks) {
    EXPECT_GT(c.len, 0u);
    EXPECT_LT(c.slot, plan.nr_slots());
    EXPECT_LE(c.dest_off + c.len, kPage) << "chunk crosses the destination page";
    EXPECT_EQ(c.dest_off, fill[c.slot]) << "chunks of a slot are contiguous";
    fill[c.slot] += c.len;
    if (c.src.foreign) {
      EXPECT_LE(c.src.offset + c.len, kPage) << "chunk crosses the source page";
    } else {
      const auto addr = reinterpret_cast<std::uintptr_t>(c.src.virt);
      EXPECT_EQ(addr / kPage, (addr + c.len - 1) / kPage) << "chunk crosses a source page";
    }
    total += c.len;
  }
  for (std::uint32_t s = 0; s < plan.nr_slots(); ++s)
    EXPECT_EQ(fill[s] - (s == 0 ? plan.first_offset : 0), plan.slot_bytes[s]);
  return total;
}

class FullCoalescing : public ::testing::TestWithParam<std::pair<std::uint32_t, std::uint32_t>> {};

// Frame sizes of the backend issue's RX scenarios (60, 1514, 9000, a 65226-byte GSO frame),
// from page-aligned and unaligned buffers.
TEST_P(FullCoalescing, UsesTheMinimalNumberOfSlots) {
  static Buffer buf;
  const auto [len, misalign] = GetParam();
  RxPlan plan;
  const RxFrag frag{hv::GrantCopyPtr::local(buf.bytes + misalign), len};
  plan_rx_slots({&frag, 1}, RxCoalesce::full, plan);
  EXPECT_EQ(plan.nr_slots(), rx_data_slots(len));
  EXPECT_EQ(check_plan(plan), len);
  for (std::uint32_t s = 0; s + 1 < plan.nr_slots(); ++s) EXPECT_EQ(plan.slot_bytes[s], kPage);
  // Copy order = packet order: the chunks walk the source buffer front to back.
  const std::byte* expect = buf.bytes + misalign;
  for (const RxChunk& c : plan.chunks) {
    EXPECT_EQ(c.src.virt, expect);
    expect += c.len;
  }
}

INSTANTIATE_TEST_SUITE_P(Frames, FullCoalescing,
                         ::testing::Values(std::make_pair(60u, 0u), std::make_pair(1514u, 0u),
                                           std::make_pair(9000u, 0u), std::make_pair(65226u, 0u),
                                           std::make_pair(60u, 4090u), std::make_pair(1514u, 3000u),
                                           std::make_pair(9000u, 100u), std::make_pair(65226u, 2u),
                                           std::make_pair(4096u, 0u),
                                           std::make_pair(4097u, 4095u)));

/// A Linux-like skb: a small linear header, then page frags at odd offsets and sizes.
std::vector<RxFrag> linux_like_frags(Buffer& buf, std::uint32_t* total) {
  std::vector<RxFrag> frags;
  frags.push_back({hv::GrantCopyPtr::local(buf.bytes + 64), 66});  // headers
  const std::uint32_t sizes[] = {1448, 4096, 2896, 4000, 1448, 4096, 3000, 2000};
  std::uint32_t page = 1;
  *total = 66;
  for (std::uint32_t s : sizes) {
    const std::uint32_t off = (s == 4096) ? 0 : 96;
    frags.push_back({hv::GrantCopyPtr::local(buf.bytes + page * kPage + off), s});
    *total += s;
    ++page;
  }
  return frags;
}

TEST(RxSlotPlanner, FullCoalescingIgnoresTheFragLayout) {
  static Buffer buf;
  std::uint32_t total = 0;
  const auto frags = linux_like_frags(buf, &total);
  RxPlan plan;
  plan_rx_slots(frags, RxCoalesce::full, plan);
  EXPECT_EQ(check_plan(plan), total);
  EXPECT_EQ(plan.nr_slots(), rx_data_slots(total));
}

TEST(RxSlotPlanner, LegacyRuleStartsNewSlotsForFragsThatDoNotFit) {
  static Buffer buf;
  std::uint32_t total = 0;
  const auto frags = linux_like_frags(buf, &total);
  RxPlan full, legacy;
  plan_rx_slots(frags, RxCoalesce::full, full);
  plan_rx_slots(frags, RxCoalesce::legacy, legacy);
  EXPECT_EQ(check_plan(legacy), total);
  EXPECT_GT(legacy.nr_slots(), full.nr_slots());
}

TEST(RxSlotPlanner, LegacyRuleCanExceedEighteenSlotsWhereFullFitsInSeventeen) {
  // 20 frags of 2049 bytes (+ a 66-byte header): two never fit one page, so after the head
  // the legacy rule gives each frag a slot of its own; full coalescing packs ~2 per page.
  static Buffer buf;
  std::vector<RxFrag> frags;
  frags.push_back({hv::GrantCopyPtr::local(buf.bytes), 66});
  std::uint32_t total = 66;
  for (std::uint32_t i = 0; i < 20; ++i) {
    frags.push_back({hv::GrantCopyPtr::local(buf.bytes + (i % 19 + 1) * kPage), 2049});
    total += 2049;
  }
  RxPlan full, legacy;
  plan_rx_slots(frags, RxCoalesce::full, full);
  plan_rx_slots(frags, RxCoalesce::legacy, legacy);
  EXPECT_EQ(full.nr_slots(), rx_data_slots(total));
  EXPECT_LE(full.nr_slots(), 18u);
  EXPECT_GT(legacy.nr_slots(), 18u);
  EXPECT_EQ(check_plan(full), total);
  EXPECT_EQ(check_plan(legacy), total);
}

TEST(RxSlotPlanner, GrantedSourceFragsKeepTheirOffsets) {
  // VM->VM: the source is another guest's TX slots (gref + offset).
  std::vector<RxFrag> frags = {
      {hv::GrantCopyPtr::granted(DomId{3}, GrantRef{10}, 4000), 96},
      {hv::GrantCopyPtr::granted(DomId{3}, GrantRef{11}, 0), 4096},
      {hv::GrantCopyPtr::granted(DomId{3}, GrantRef{12}, 512), 3000},
  };
  RxPlan plan;
  plan_rx_slots(frags, RxCoalesce::full, plan);
  EXPECT_EQ(check_plan(plan), 96u + 4096 + 3000);
  EXPECT_EQ(plan.nr_slots(), 2u);
  EXPECT_EQ(plan.chunks[0].src.ref, GrantRef{10});
  EXPECT_EQ(plan.chunks[0].src.offset, 4000);
  EXPECT_EQ(plan.chunks[1].src.ref, GrantRef{11});
  EXPECT_EQ(plan.chunks[1].len, 4000);  // fills slot 0 to 4096
  EXPECT_EQ(plan.chunks[2].src.offset, 4000);
  EXPECT_EQ(plan.chunks[2].len, 96);
}

// feature-xdp-headroom: Linux netfront with an XDP program asks for 256 bytes before the
// packet. Slot 0 then holds 3840 bytes; the packet still takes the fewest slots it can.
TEST(RxSlotPlanner, XdpHeadroomStartsSlotZeroAtTheHeadroomAndCountsInTheMinimum) {
  static Buffer buf;
  RxPlan plan;
  for (const std::uint32_t len : {60u, 1514u, 3840u, 3841u, 9000u, 61440u, 65226u}) {
    const RxFrag frag{hv::GrantCopyPtr::local(buf.bytes + 2), len};
    plan_rx_slots({&frag, 1}, RxCoalesce::full, plan, 256);
    EXPECT_EQ(plan.first_offset, 256u) << len;
    EXPECT_EQ(plan.chunks.front().dest_off, 256u) << len;
    EXPECT_EQ(plan.nr_slots(), rx_data_slots(len, 256)) << len;
    EXPECT_EQ(check_plan(plan), len) << len;
    if (plan.nr_slots() > 1) {
      EXPECT_EQ(plan.slot_bytes[0], kPage - 256) << len;
    }
    for (std::uint32_t s = 1; s + 1 < plan.nr_slots(); ++s) EXPECT_EQ(plan.slot_bytes[s], kPage);
  }
  EXPECT_EQ(rx_data_slots(3840, 256), 1u);
  EXPECT_EQ(rx_data_slots(3841, 256), 2u) << "one byte more than fits after the headroom";
  EXPECT_EQ(rx_data_slots(61440, 0), 15u) << "15 whole pages";
  EXPECT_EQ(rx_data_slots(61440, 256), 16u) << "the headroom pushes 256 bytes into a 16th";
  // The legacy rule keeps the headroom too.
  std::uint32_t total = 0;
  const auto frags = linux_like_frags(buf, &total);
  plan_rx_slots(frags, RxCoalesce::legacy, plan, 256);
  EXPECT_EQ(plan.chunks.front().dest_off, 256u);
  EXPECT_EQ(check_plan(plan), total);
  // A headroom the xenbus side would refuse is capped so that slot 0 keeps a byte of data.
  const RxFrag two{hv::GrantCopyPtr::local(buf.bytes), 2};
  plan_rx_slots({&two, 1}, RxCoalesce::full, plan, 0x7FFF);
  EXPECT_EQ(plan.first_offset, kMaxRxHeadroom);
  EXPECT_EQ(plan.nr_slots(), 2u);
  EXPECT_EQ(check_plan(plan), 2u);
}

TEST(RxSlotPlanner, RandomLayoutsAlwaysUseTheMinimumAndKeepEveryByte) {
  static Buffer buf;
  std::mt19937 rng(1234);
  RxPlan plan;
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<RxFrag> frags;
    std::uint32_t total = 0;
    const int n = 1 + static_cast<int>(rng() % 17);
    for (int i = 0; i < n && total < 60000; ++i) {
      const std::uint32_t off = rng() % kPage;
      const std::uint32_t len = 1 + rng() % (2 * kPage);
      const std::uint32_t start = (static_cast<std::uint32_t>(i) % 10) * 2 * kPage + off;
      frags.push_back({hv::GrantCopyPtr::local(buf.bytes + start), len});
      total += len;
    }
    plan_rx_slots(frags, RxCoalesce::full, plan);
    ASSERT_EQ(check_plan(plan), total);
    ASSERT_EQ(plan.nr_slots(), rx_data_slots(total));
    plan_rx_slots(frags, RxCoalesce::legacy, plan);
    ASSERT_EQ(check_plan(plan), total);
    ASSERT_GE(plan.nr_slots(), rx_data_slots(total));
    const std::uint32_t headroom = rng() % kPage;
    plan_rx_slots(frags, RxCoalesce::full, plan, headroom);
    ASSERT_EQ(check_plan(plan), total);
    ASSERT_EQ(plan.nr_slots(), rx_data_slots(total, headroom)) << headroom;
  }
}

}  // namespace
}  // namespace unetback::vif
