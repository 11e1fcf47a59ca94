// The frontend's xenbus keys: what it reads and exactly what it writes (Linux netfront's
// talk_to_netback).
#include "frontend-shim/xenbus_keys.hpp"

#include <gtest/gtest.h>
#include <map>

namespace unetback::netfront {
namespace {

using Keys = std::vector<std::pair<std::string, std::string>>;

TEST(XenbusKeys, OneQueueWritesFlatKeysAndConnectsLast) {
  FrontendConnect c;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{5}});
  const Keys want{{"tx-ring-ref", "8"},
                  {"rx-ring-ref", "9"},
                  {"event-channel", "5"},
                  {"request-rx-copy", "1"},
                  {"feature-rx-notify", "1"},
                  {"feature-sg", "1"},
                  {"feature-gso-tcpv4", "1"},
                  {"feature-gso-tcpv6", "1"},
                  {"feature-ipv6-csum-offload", "1"},
                  {"state", "4"}};
  EXPECT_EQ(frontend_connect_keys(c), want);
}

TEST(XenbusKeys, SplitChannelsWriteTxAndRxPorts) {
  FrontendConnect c;
  c.split_event_channels = true;
  c.write_num_queues = true;
  c.sg = false;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{6}});
  const Keys got = frontend_connect_keys(c);
  const std::map<std::string, std::string> m(got.begin(), got.end());
  EXPECT_EQ(m.at("multi-queue-num-queues"), "1");
  EXPECT_EQ(m.at("event-channel-tx"), "5");
  EXPECT_EQ(m.at("event-channel-rx"), "6");
  EXPECT_EQ(m.count("event-channel"), 0U);
  EXPECT_EQ(m.at("feature-sg"), "0");
  EXPECT_EQ(got.back(), (std::pair<std::string, std::string>{"state", "4"}));
}

TEST(XenbusKeys, SeveralQueuesGoUnderQueueN) {
  FrontendConnect c;
  c.write_num_queues = true;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{5}});
  c.queues.push_back({GrantRef{10}, GrantRef{11}, Port{7}, Port{7}});
  const Keys got = frontend_connect_keys(c);
  const std::map<std::string, std::string> m(got.begin(), got.end());
  EXPECT_EQ(m.at("multi-queue-num-queues"), "2");
  EXPECT_EQ(m.at("queue-0/tx-ring-ref"), "8");
  EXPECT_EQ(m.at("queue-0/event-channel"), "5");
  EXPECT_EQ(m.at("queue-1/rx-ring-ref"), "11");
  EXPECT_EQ(m.at("queue-1/event-channel"), "7");
  EXPECT_EQ(m.count("tx-ring-ref"), 0U);
}

TEST(XenbusKeys, NumQueuesOnlyWhenTheBackendAdvertisedAMax) {
  FrontendConnect c;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{5}});
  for (const auto& [k, v] : frontend_connect_keys(c)) EXPECT_NE(k, "multi-queue-num-queues");
}

// Linux netfront writes xdp-headroom (0, or 256 with an XDP program) only to a backend that
// offers feature-xdp-headroom, in the same transaction as the rest.
TEST(XenbusKeys, XdpHeadroomOnlyWhenTheBackendOffersIt) {
  FrontendConnect c;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{5}});
  for (const auto& [k, v] : frontend_connect_keys(c)) EXPECT_NE(k, "xdp-headroom");
  c.xdp_headroom = 256;
  const Keys got = frontend_connect_keys(c);
  const std::map<std::string, std::string> m(got.begin(), got.end());
  EXPECT_EQ(m.at("xdp-headroom"), "256");
  EXPECT_EQ(got.back(), (std::pair<std::string, std::string>{"state", "4"}));
  std::map<std::string, std::string> be{{"feature-xdp-headroom", "1"}};
  auto read = [&](const char* k) -> std::optional<std::string> {
    auto it = be.find(k);
    if (it == be.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_TRUE(read_backend_features(read).xdp_headroom);
  be.clear();
  EXPECT_FALSE(read_backend_features(read).xdp_headroom);
}

TEST(XenbusKeys, BackendFeaturesAreReadLikeXenbusReadUnsigned) {
  std::map<std::string, std::string> be{{"feature-rx-copy", "1"},
                                        {"multi-queue-max-queues", "4"},
                                        {"feature-split-event-channels", "1"},
                                        {"feature-sg", "1"},
                                        {"feature-gso-tcpv4", "2"},
                                        {"feature-gso-tcpv6", "0"},
                                        {"feature-ipv6-csum-offload", "yes"}};
  auto read = [&](const char* k) -> std::optional<std::string> {
    auto it = be.find(k);
    if (it == be.end()) return std::nullopt;
    return it->second;
  };
  BackendFeatures f = read_backend_features(read);
  EXPECT_TRUE(f.rx_copy);
  EXPECT_EQ(f.max_queues, 4U);
  EXPECT_TRUE(f.split_event_channels);
  EXPECT_TRUE(f.sg);
  EXPECT_TRUE(f.gso_tcpv4);  // any non-zero number
  EXPECT_FALSE(f.gso_tcpv6);
  EXPECT_FALSE(f.ipv6_csum);  // malformed means off
  be.erase("feature-rx-copy");
  be["multi-queue-max-queues"] = "-1";
  f = read_backend_features(read);
  EXPECT_FALSE(f.rx_copy);
  EXPECT_FALSE(f.max_queues.has_value());
}

}  // namespace
}  // namespace unetback::netfront

namespace unetback::netfront {
namespace {

TEST(XenbusKeys, MiniOsWritesTheRingsTheChannelRxCopyAndConnectedOnly) {
  FrontendConnect c;
  c.feature_keys = false;
  c.rx_notify = false;
  c.sg = false;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{5}});
  const std::vector<std::pair<std::string, std::string>> want{{"tx-ring-ref", "8"},
                                                              {"rx-ring-ref", "9"},
                                                              {"event-channel", "5"},
                                                              {"request-rx-copy", "1"},
                                                              {"state", "4"}};
  EXPECT_EQ(frontend_connect_keys(c), want);
}

TEST(XenbusKeys, XenvifWritesNumQueuesForOneQueueWithFlatKeysAndCanAskForMulticastControl) {
  FrontendConnect c;
  c.write_num_queues = true;
  c.request_multicast_control = true;
  c.queues.push_back({GrantRef{8}, GrantRef{9}, Port{5}, Port{5}});
  const auto keys = frontend_connect_keys(c);
  const std::map<std::string, std::string> m(keys.begin(), keys.end());
  EXPECT_EQ(m.at("multi-queue-num-queues"), "1");
  EXPECT_EQ(m.at("tx-ring-ref"), "8");  // flat, not queue-0/
  EXPECT_EQ(m.count("queue-0/tx-ring-ref"), 0U);
  EXPECT_EQ(m.at("request-multicast-control"), "1");
  EXPECT_EQ(keys.back(), (std::pair<std::string, std::string>{"state", "4"}));
}

TEST(XenbusKeys, MulticastControlFeaturesAreRead) {
  const auto f = read_backend_features([](const char* key) -> std::optional<std::string> {
    if (std::string_view(key) == "feature-dynamic-multicast-control") return "1";
    return std::nullopt;
  });
  EXPECT_TRUE(f.dynamic_mcast_control);
  EXPECT_FALSE(f.mcast_control);
}

}  // namespace
}  // namespace unetback::netfront
