// The guest-RX multicast filter with Linux netback's rules: off lets everything through;
// on, a group passes only once added; broadcast and unicast always pass; 64 entries, an add
// past them refused with the filter unchanged; a delete removes one entry.
#include "backend/vif/mcast_filter.hpp"

#include <gtest/gtest.h>

namespace unetback::vif {
namespace {

std::array<std::uint8_t, 6> group(std::uint8_t n) {
  return {0x01, 0x00, 0x5e, 0x00, 0x01, n};
}
std::array<std::byte, 6> dst(const std::array<std::uint8_t, 6>& m) {
  std::array<std::byte, 6> d{};
  for (std::size_t i = 0; i < 6; ++i) d[i] = std::byte{m[i]};
  return d;
}

TEST(McastFilter, OffAcceptsEveryGroup) {
  McastFilter f;
  EXPECT_TRUE(f.accepts(dst(group(1))));
  f.set_enabled(true);
  EXPECT_FALSE(f.accepts(dst(group(1))));
}

TEST(McastFilter, OnlyAddedGroupsPassAndBroadcastAndUnicastAlwaysDo) {
  McastFilter f;
  f.set_enabled(true);
  ASSERT_TRUE(f.add(group(1)));
  EXPECT_TRUE(f.accepts(dst(group(1))));
  EXPECT_FALSE(f.accepts(dst(group(2))));
  EXPECT_TRUE(f.accepts(dst({0xff, 0xff, 0xff, 0xff, 0xff, 0xff})));
  EXPECT_TRUE(f.accepts(dst({0x00, 0x16, 0x3e, 0x00, 0x00, 0x02})));
  f.remove(group(1));
  EXPECT_FALSE(f.accepts(dst(group(1))));
  f.remove(group(9));  // not there: nothing happens
  EXPECT_EQ(f.size(), 0u);
}

TEST(McastFilter, SixtyFiveAddsTheLastRefusedAndTheFilterUnchanged) {
  McastFilter f;
  f.set_enabled(true);
  for (std::uint8_t i = 0; i < 64; ++i) ASSERT_TRUE(f.add(group(i))) << int(i);
  EXPECT_FALSE(f.add(group(200)));
  EXPECT_EQ(f.size(), 64u);
  EXPECT_FALSE(f.accepts(dst(group(200))));
  EXPECT_TRUE(f.accepts(dst(group(63))));
  f.remove(group(5));
  EXPECT_TRUE(f.add(group(200))) << "room again after a delete";
}

TEST(McastFilter, DuplicateAddsTakeAnEntryEachAndADeleteRemovesOne) {
  McastFilter f;
  f.set_enabled(true);
  ASSERT_TRUE(f.add(group(1)));
  ASSERT_TRUE(f.add(group(1)));
  f.remove(group(1));
  EXPECT_TRUE(f.accepts(dst(group(1))));
  f.remove(group(1));
  EXPECT_FALSE(f.accepts(dst(group(1))));
  f.clear();
  EXPECT_EQ(f.size(), 0u);
}

}  // namespace
}  // namespace unetback::vif
