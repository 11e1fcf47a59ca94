// The TX slot splitter against Linux xen-netfront's layout rules.
#include "frontend-shim/tx_slot_plan.hpp"

#include <gtest/gtest.h>
#include <numeric>

namespace unetback::netfront {
namespace {

std::size_t total(const TxSlotPlan& p) {
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < p.count; ++i) n += p.slots[i].size;
  return n;
}

TEST(TxSlotPlan, SmallFrameIsOneSlotAtItsOffset) {
  auto p = plan_tx_slots(60, 66, true);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->count, 1U);
  EXPECT_EQ(p->slots[0], (TxSlot{66, 60}));
  EXPECT_FALSE(p->bounced);
}

TEST(TxSlotPlan, FirstSlotRunsToThePageEndThenWholePages) {
  auto p = plan_tx_slots(9000, 66, true);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->count, 3U);
  EXPECT_EQ(p->slots[0], (TxSlot{66, 4030}));
  EXPECT_EQ(p->slots[1], (TxSlot{0, 4096}));
  EXPECT_EQ(p->slots[2], (TxSlot{0, 874}));
}

TEST(TxSlotPlan, PageAlignedFrameUsesWholePages) {
  auto p = plan_tx_slots(8192, 0, true);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->count, 2U);
  EXPECT_EQ(p->slots[0], (TxSlot{0, 4096}));
  EXPECT_EQ(p->slots[1], (TxSlot{0, 4096}));
}

TEST(TxSlotPlan, LargestFrameNeverNeedsMoreThan18Slots) {
  for (std::size_t off = 0; off < 4096 - 14; off += 7) {
    auto p = plan_tx_slots(0xFFFF, off, true);
    ASSERT_TRUE(p) << off;
    EXPECT_LE(p->count, 18U) << off;
    EXPECT_LE(p->count, kMaxTxDataSlots) << off;
    EXPECT_EQ(total(*p), 0xFFFFU);
    for (std::uint32_t i = 0; i < p->count; ++i)
      EXPECT_LE(p->slots[i].offset + p->slots[i].size, 4096) << off << " slot " << i;
  }
  EXPECT_EQ(plan_tx_slots(0xFFFF, 0, true)->count, 16U);
  EXPECT_EQ(plan_tx_slots(0xFFFF, 4000, true)->count, 17U);
}

TEST(TxSlotPlan, RefusesFramesBeyondTheWireLimit) {
  EXPECT_EQ(plan_tx_slots(0x10000, 0, true).error(), std::errc::message_size);
  EXPECT_EQ(plan_tx_slots(65000, 0, true).error(), std::error_code{});
}

TEST(TxSlotPlan, RefusesFramesShorterThanAnEthernetHeader) {
  EXPECT_EQ(plan_tx_slots(13, 0, true).error(), std::errc::invalid_argument);
  EXPECT_EQ(plan_tx_slots(0, 0, true).error(), std::errc::invalid_argument);
  EXPECT_TRUE(plan_tx_slots(14, 0, true));
}

TEST(TxSlotPlan, RefusesAnOffsetOutsideThePage) {
  EXPECT_EQ(plan_tx_slots(100, 4096, true).error(), std::errc::invalid_argument);
}

TEST(TxSlotPlan, HeadTooCloseToThePageEndIsBouncedToOffsetZero) {
  // 4090 + 14 > 4096: the first slot would hold 6 bytes, below ETH_HLEN.
  auto p = plan_tx_slots(1514, 4090, true);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->bounced);
  ASSERT_EQ(p->count, 1U);
  EXPECT_EQ(p->slots[0], (TxSlot{0, 1514}));
  // 4082 + 14 == 4096: exactly an Ethernet header fits, no bounce.
  auto q = plan_tx_slots(1514, 4082, true);
  ASSERT_TRUE(q);
  EXPECT_FALSE(q->bounced);
  EXPECT_EQ(q->slots[0], (TxSlot{4082, 14}));
}

TEST(TxSlotPlan, WithoutSgAFrameIsOneSlot) {
  auto p = plan_tx_slots(1514, 66, false);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->count, 1U);
  EXPECT_EQ(p->slots[0], (TxSlot{66, 1514}));
  // Would cross the page: bounced to a fresh page, still one slot.
  auto q = plan_tx_slots(4000, 1000, false);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->bounced);
  ASSERT_EQ(q->count, 1U);
  EXPECT_EQ(q->slots[0], (TxSlot{0, 4000}));
  EXPECT_TRUE(plan_tx_slots(4096, 0, false));
  EXPECT_EQ(plan_tx_slots(4097, 0, false).error(), std::errc::message_size);
  EXPECT_EQ(plan_tx_slots(9000, 0, false).error(), std::errc::message_size);
}

TEST(TxSlotPlan, StopThresholdIsTheLargestPacketPlusItsExtra) {
  EXPECT_EQ(kTxStopThreshold, 19U);
}

}  // namespace
}  // namespace unetback::netfront
