// Seed 002's refill rule: refill when free > min(budget, ring) / 2, not only at half a ring.
#include "frontend-shim/rx_refill.hpp"

#include <gtest/gtest.h>

namespace unetback::netfront {
namespace {

constexpr std::uint32_t kRing = 256;

class RxRefillSeed002 : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(RxRefillSeed002, RefillsOnceFreeExceedsHalfTheSmallerOfBudgetAndRing) {
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

INSTANTIATE_TEST_SUITE_P(Budgets1To512, RxRefillSeed002, ::testing::Range<std::uint32_t>(1, 513));

TEST(RxRefill, DefaultBudgetRefillsAfter33FreeSlots) {
  EXPECT_FALSE(rx_refill_due(32, 64, kRing));
  EXPECT_TRUE(rx_refill_due(33, 64, kRing));
}

TEST(RxRefill, BudgetOfOneRefillsOnEveryFreeSlot) {
  EXPECT_FALSE(rx_refill_due(0, 1, kRing));
  EXPECT_TRUE(rx_refill_due(1, 1, kRing));
}

TEST(RxRefill, EarlyRuleIsSeed002Rule) {
  for (std::uint32_t budget : {1u, 16u, 64u, 128u, 256u, 512u})
    for (std::uint32_t free = 0; free <= kRing; ++free)
      EXPECT_EQ(rx_refill_due(RxRefillRule::early, free, budget, kRing),
                rx_refill_due(free, budget, kRing))
          << "budget " << budget << " free " << free;
}

TEST(RxRefill, HalfRingRuleWaitsForHalfTheRingWhateverTheBudget) {
  for (std::uint32_t budget : {1u, 16u, 64u, 256u, 512u}) {
    EXPECT_EQ(rx_refill_threshold(RxRefillRule::half_ring, budget, kRing), kRing / 2);
    EXPECT_FALSE(rx_refill_due(RxRefillRule::half_ring, kRing / 2, budget, kRing));
    EXPECT_TRUE(rx_refill_due(RxRefillRule::half_ring, kRing / 2 + 1, budget, kRing));
  }
  // The seed's point: with the default budget the old rule leaves 33..128 free slots unfilled
  // where seed 002 already refills.
  EXPECT_TRUE(rx_refill_due(RxRefillRule::early, 33, 64, kRing));
  EXPECT_FALSE(rx_refill_due(RxRefillRule::half_ring, 33, 64, kRing));
  EXPECT_FALSE(rx_refill_due(RxRefillRule::half_ring, 128, 64, kRing));
}

TEST(RxRefill, RuleNamesRoundTripAndRejectOtherSpellings) {
  for (RxRefillRule r : {RxRefillRule::early, RxRefillRule::half_ring})
    EXPECT_EQ(parse_rx_refill_rule(rx_refill_rule_name(r)), r);
  EXPECT_EQ(rx_refill_rule_name(RxRefillRule::half_ring), "half-ring");
  for (const char* bad : {"", "Early", "half_ring", "halfring", "early ", "half-ring2"})
    EXPECT_FALSE(parse_rx_refill_rule(bad).has_value()) << bad;
}

}  // namespace
}  // namespace unetback::netfront
