// Seed 002's refill rule: refill when free > min(budget, ring) / 2, not only at half a ring.
#include "frontend-shim/rx_refill.hpp"

#include <gtest/gtest.h>

namespace unetback::netfront {
namespace {

constexpr std::uint32_t kRing = 256;

class RxRefillRule : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(RxRefillRule, RefillsOnceFreeExceedsHalfTheSmallerOfBudgetAndRing) {
  const std::uint32_t budget = GetParam();
  const std::uint32_t threshold = std::min(budget, kRing) / 2;
  EXPECT_EQ(rx_refill_threshold(budget, kRing), threshold);
  for (std::uint32_t free = 0; free <= kRing; ++free) {
    EXPECT_EQ(rx_refill_due(free, budget, kRing), free > threshold)
        << "budget " << budget << " free " << free;
    // Never later than the old half-a-ring rule: whenever that one refills, so does seed 002.
    if (free > kRing / 2) {
      EXPECT_TRUE(rx_refill_due(free, budget, kRing));
    }
  }
  // With a budget below the ring, seed 002 refills strictly earlier than half a ring.
  if (budget < kRing) {
    EXPECT_TRUE(rx_refill_due(threshold + 1, budget, kRing));
    EXPECT_FALSE(threshold + 1 > kRing / 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets1To512, RxRefillRule, ::testing::Range<std::uint32_t>(1, 513));

TEST(RxRefill, DefaultBudgetRefillsAfter33FreeSlots) {
  EXPECT_FALSE(rx_refill_due(32, 64, kRing));
  EXPECT_TRUE(rx_refill_due(33, 64, kRing));
}

TEST(RxRefill, BudgetOfOneRefillsOnEveryFreeSlot) {
  EXPECT_FALSE(rx_refill_due(0, 1, kRing));
  EXPECT_TRUE(rx_refill_due(1, 1, kRing));
}

}  // namespace
}  // namespace unetback::netfront
