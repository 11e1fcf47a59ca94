// The internal switch's forwarding database: learning, ageing, a port leaving, and the bound a
// guest cycling through source MACs runs into.
#include "backend/vif/mac_table.hpp"

#include <gtest/gtest.h>

namespace unetback::vif {
namespace {

using namespace std::chrono_literals;
using Clock = MacTable::Clock;

net::MacAddress mac(std::uint8_t last, std::uint8_t first = 0x00) {
  return net::MacAddress{{first, 0x16, 0x3e, 0x00, 0x00, last}};
}

TEST(MacTable, LearntSourceIsFoundOnItsPort) {
  MacTable t;
  const auto now = Clock::now();
  EXPECT_FALSE(t.lookup(mac(1), now));
  EXPECT_TRUE(t.learn(mac(1), 3, now));
  EXPECT_EQ(t.lookup(mac(1), now), 3u);
  EXPECT_FALSE(t.lookup(mac(2), now));
}

TEST(MacTable, MacThatMovesFollowsItsLatestPort) {
  MacTable t;
  const auto now = Clock::now();
  t.learn(mac(1), 3, now);
  t.learn(mac(1), 5, now + 1s);
  EXPECT_EQ(t.lookup(mac(1), now + 1s), 5u);
  EXPECT_EQ(t.size(), 1u);
}

TEST(MacTable, EntryOlderThanTheAgeingTimeIsNotUsed) {
  MacTable t(10s);
  const auto now = Clock::now();
  t.learn(mac(1), 3, now);
  EXPECT_EQ(t.lookup(mac(1), now + 10s), 3u);
  EXPECT_FALSE(t.lookup(mac(1), now + 11s));
  // Seeing the source again refreshes it.
  t.learn(mac(1), 3, now + 11s);
  EXPECT_EQ(t.lookup(mac(1), now + 20s), 3u);
  t.expire(now + 40s);
  EXPECT_EQ(t.size(), 0u);
}

TEST(MacTable, MulticastAndZeroSourcesAreNeverLearnt) {
  MacTable t;
  const auto now = Clock::now();
  EXPECT_TRUE(t.learn(mac(1, 0x01), 3, now));  // group bit set
  EXPECT_TRUE(t.learn(net::MacAddress{}, 3, now));
  EXPECT_EQ(t.size(), 0u);
}

TEST(MacTable, PortThatLeavesForgetsItsEntriesOnly) {
  MacTable t;
  const auto now = Clock::now();
  t.learn(mac(1), 3, now);
  t.learn(mac(2), 3, now);
  t.learn(mac(3), 4, now);
  t.forget_port(3);
  EXPECT_FALSE(t.lookup(mac(1), now));
  EXPECT_FALSE(t.lookup(mac(2), now));
  EXPECT_EQ(t.lookup(mac(3), now), 4u);
}

TEST(MacTable, GuestCyclingMacsCannotPushOthersOut) {
  MacTable t(300s, 8);
  const auto now = Clock::now();
  t.learn(mac(1), 1, now);  // the honest guest
  std::size_t refused = 0;
  for (std::uint8_t i = 10; i < 60; ++i)
    if (!t.learn(mac(i), 2, now)) ++refused;
  EXPECT_EQ(t.size(), 8u);
  EXPECT_EQ(refused, 50u - 7u);
  EXPECT_EQ(t.lookup(mac(1), now), 1u) << "a full table evicted an existing entry";
  // Once the flood's entries age out, new sources are learnt again.
  EXPECT_TRUE(t.learn(mac(2), 1, now + 301s));
}

}  // namespace
}  // namespace unetback::vif
