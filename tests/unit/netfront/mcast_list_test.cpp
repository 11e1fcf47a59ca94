// --mode xenvif's multicast list: the TAP's groups from /proc/net/dev_mcast and the
// MCAST_ADD/DEL changes that keep the backend's filter in step.
#include "frontend-shim/mcast_list.hpp"

#include <gtest/gtest.h>

namespace unetback::shim {
namespace {

constexpr std::string_view kDevMcast =
    "1    lo              1     0     010000000001\n"
    "4    eth0            1     0     333300000001\n"
    "4    eth0            2     0     01005e000001\n"
    "4    eth0            1     0     3333ff00a1b2\n"
    "4    eth0            1     0     3333ff00a1b2\n"  // twice: one entry
    "4    eth0            1     0     00163e000001\n"  // not a group: skipped
    "4    eth0            1     0     01005e0000zz\n"  // not hex: skipped
    "4    eth0            1\n"                         // short: skipped
    "5    eth1            1     0     01005e0000fb\n";

TEST(McastList, TheTapsGroupsSortedAndUniqueOthersIgnored) {
  const auto got = parse_dev_mcast(kDevMcast, "eth0");
  const std::vector<McastAddr> want{{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01},
                                    {0x33, 0x33, 0x00, 0x00, 0x00, 0x01},
                                    {0x33, 0x33, 0xff, 0x00, 0xa1, 0xb2}};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(parse_dev_mcast(kDevMcast, "eth9").empty());
  EXPECT_TRUE(parse_dev_mcast("", "eth0").empty());
  EXPECT_EQ(parse_dev_mcast(kDevMcast, "eth1").size(), 1U);
}

TEST(McastList, DeltaAddsWhatIsNewAndRemovesWhatIsGone) {
  const McastAddr a{0x01, 0x00, 0x5e, 0, 0, 1}, b{0x01, 0x00, 0x5e, 0, 0, 2},
      c{0x33, 0x33, 0, 0, 0, 1};
  const McastDelta d = mcast_delta({a, b}, {b, c});
  EXPECT_EQ(d.add, std::vector<McastAddr>{c});
  EXPECT_EQ(d.remove, std::vector<McastAddr>{a});
  const McastDelta none = mcast_delta({a, c}, {a, c});
  EXPECT_TRUE(none.add.empty());
  EXPECT_TRUE(none.remove.empty());
}

}  // namespace
}  // namespace unetback::shim
