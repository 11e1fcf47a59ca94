#include "backend/xenbus/features.hpp"

#include <gtest/gtest.h>
#include <map>

#include "tests/unit/xenbus/memory_xenstore.hpp"

namespace unetback::xenbus {
namespace {

std::map<std::string, std::string> as_map(const KeyValues& kv) {
  return {kv.begin(), kv.end()};
}

TEST(Features, AdvertisesWhatTheIssueLists) {
  const auto m = as_map(feature_advertisement({4, true, false}));
  const std::map<std::string, std::string> expected = {
      {"feature-sg", "1"},
      {"feature-gso-tcpv4", "1"},
      {"feature-gso-tcpv6", "1"},
      {"feature-ipv6-csum-offload", "1"},
      {"feature-rx-copy", "1"},
      {"feature-rx-flip", "0"},
      {"feature-xdp-headroom", "1"},
      {"feature-multicast-control", "1"},
      {"feature-dynamic-multicast-control", "1"},
      {"feature-split-event-channels", "1"},
      {"multi-queue-max-queues", "4"},
  };
  EXPECT_EQ(m, expected);
}

TEST(Features, CtrlRingOnlyWhenServedAndSplitChannelsFollowTheOption) {
  const auto m = as_map(feature_advertisement({1, false, true}));
  EXPECT_EQ(m.at("feature-ctrl-ring"), "1");
  EXPECT_EQ(m.at("feature-split-event-channels"), "0");
  EXPECT_EQ(m.at("multi-queue-max-queues"), "1");
  EXPECT_EQ(as_map(feature_advertisement({1, false, false})).count("feature-ctrl-ring"), 0U);
}

TEST(Features, ZeroMaxQueuesIsAdvertisedAsOne) {
  EXPECT_EQ(as_map(feature_advertisement({0, true, false})).at("multi-queue-max-queues"), "1");
}

TEST(Features, WrittenInOneTransactionRetriedOnEagain) {
  testing::MemoryXenStore xs;
  xs.fail_next_commits(2);
  const std::string be = "/local/domain/0/backend/vif/5/0";
  ASSERT_FALSE(write_features(xs, be, {2, true, true}));
  EXPECT_EQ(xs.commits(), 1U);
  for (const auto& [key, value] : feature_advertisement({2, true, true})) {
    auto r = xs.read(be + "/" + key);
    ASSERT_TRUE(r) << key;
    EXPECT_EQ(*r, value) << key;
  }
}

}  // namespace
}  // namespace unetback::xenbus
