// The frontend's keys are hostile: every rule of parse_frontend_config, each with the exact key
// it blames.
#include "backend/xenbus/frontend_config.hpp"

#include <cerrno>
#include <gtest/gtest.h>
#include <map>

#include "tests/unit/xenbus/key_map.hpp"

namespace unetback::xenbus {
namespace {

using key_map::Keys;
using key_map::reader;

// What Linux netfront writes for one queue with split event channels.
Keys netfront_one_queue() {
  return {{"tx-ring-ref", "8"},
          {"rx-ring-ref", "9"},
          {"event-channel-tx", "11"},
          {"event-channel-rx", "12"},
          {"request-rx-copy", "1"},
          {"feature-rx-notify", "1"},
          {"feature-sg", "1"},
          {"feature-gso-tcpv4", "1"},
          {"feature-gso-tcpv6", "1"},
          {"feature-ipv6-csum-offload", "1"},
          {"multi-queue-num-queues", "1"}};
}

Keys netfront_queues(unsigned n) {
  Keys k = {{"request-rx-copy", "1"}, {"multi-queue-num-queues", std::to_string(n)}};
  for (unsigned i = 0; i < n; ++i) {
    const std::string p = "queue-" + std::to_string(i) + "/";
    k[p + "tx-ring-ref"] = std::to_string(100 + 2 * i);
    k[p + "rx-ring-ref"] = std::to_string(101 + 2 * i);
    k[p + "event-channel"] = std::to_string(20 + i);
  }
  return k;
}

constexpr FrontendLimits kLimits{8, true};

KeyError error_of(const Keys& k, FrontendLimits limits = kLimits) {
  auto r = parse_frontend_config(reader(k), limits);
  EXPECT_FALSE(r.has_value());
  return r ? KeyError{} : r.error();
}

TEST(FrontendConfig, ReadsLinuxNetfrontWithOneQueueAndSplitChannels) {
  const Keys k = netfront_one_queue();
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r) << r.error().key << ": " << r.error().reason;
  EXPECT_TRUE(r->rx_copy);
  EXPECT_TRUE(r->rx_notify);
  EXPECT_TRUE(r->sg);
  EXPECT_TRUE(r->gso_tcpv4);
  EXPECT_TRUE(r->gso_tcpv6);
  EXPECT_TRUE(r->csum_ipv4);
  EXPECT_TRUE(r->csum_ipv6);
  EXPECT_FALSE(r->multicast_control);
  ASSERT_EQ(r->queues.size(), 1U);
  EXPECT_EQ(r->queues[0], (QueueConfig{GrantRef{8}, GrantRef{9}, Port{11}, Port{12}}));
  EXPECT_TRUE(r->queues[0].split_event_channels());
  EXPECT_FALSE(r->ctrl.has_value());
}

TEST(FrontendConfig, AbsentFeatureKeysTakeNetifDefaults) {
  const Keys k = {
      {"request-rx-copy", "1"}, {"tx-ring-ref", "8"}, {"rx-ring-ref", "9"}, {"event-channel", "3"}};
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->rx_notify);
  EXPECT_FALSE(r->sg);
  EXPECT_FALSE(r->gso_tcpv4);
  EXPECT_FALSE(r->gso_tcpv6);
  EXPECT_TRUE(r->csum_ipv4) << "feature-no-csum-offload absent = IPv4 checksum offload on";
  EXPECT_FALSE(r->csum_ipv6) << "feature-ipv6-csum-offload absent = off";
  ASSERT_EQ(r->queues.size(), 1U) << "multi-queue-num-queues absent = 1";
  EXPECT_EQ(r->queues[0].evtchn_tx, Port{3});
  EXPECT_EQ(r->queues[0].evtchn_rx, Port{3});
  EXPECT_FALSE(r->queues[0].split_event_channels());
}

TEST(FrontendConfig, NoCsumOffloadTurnsIpv4ChecksumOff) {
  Keys k = netfront_one_queue();
  k["feature-no-csum-offload"] = "1";
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->csum_ipv4);
}

TEST(FrontendConfig, RxCopyMissingOrZeroIsNotSupported) {
  Keys k = netfront_one_queue();
  k.erase("request-rx-copy");
  EXPECT_EQ(error_of(k),
            (KeyError{"request-rx-copy", "frontend does not support rx-copy", EOPNOTSUPP}));
  k["request-rx-copy"] = "0";
  EXPECT_EQ(error_of(k).error, EOPNOTSUPP);
  k["request-rx-copy"] = "2";
  EXPECT_EQ(error_of(k).error, EINVAL);
}

TEST(FrontendConfig, BooleanKeysAcceptOnlyZeroOrOne) {
  for (const char* key :
       {"feature-rx-notify", "feature-sg", "feature-gso-tcpv4", "feature-gso-tcpv6",
        "feature-no-csum-offload", "feature-ipv6-csum-offload", "request-multicast-control"}) {
    for (const char* bad : {"", "2", "yes", " 1", "1 ", "01", "-1"}) {
      Keys k = netfront_one_queue();
      k[key] = bad;
      const KeyError e = error_of(k);
      EXPECT_EQ(e.key, key) << '"' << bad << '"';
      EXPECT_EQ(e.error, EINVAL);
    }
  }
}

TEST(FrontendConfig, QueueCountMustBeOneToMax) {
  for (const char* bad :
       {"0", "9", "1000000000", "99999999999", "-1", "+1", "1 ", " 1", "", "0x2", "two"}) {
    Keys k = netfront_one_queue();
    k["multi-queue-num-queues"] = bad;
    const KeyError e = error_of(k);
    EXPECT_EQ(e.key, "multi-queue-num-queues") << '"' << bad << '"';
    EXPECT_EQ(e.error, EINVAL);
  }
  // Exactly the advertised maximum is fine.
  const Keys k = netfront_queues(8);
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->queues.size(), 8U);
}

TEST(FrontendConfig, MultiQueueKeysLiveUnderQueueDirectories) {
  Keys k = netfront_queues(3);
  // Flat keys are ignored with more than one queue.
  k["tx-ring-ref"] = "999";
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->queues.size(), 3U);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(r->queues[i].tx_ring_ref, GrantRef{100 + 2 * i});
    EXPECT_EQ(r->queues[i].rx_ring_ref, GrantRef{101 + 2 * i});
    EXPECT_EQ(r->queues[i].evtchn_tx, Port{20 + i});
  }
  k.erase("queue-2/rx-ring-ref");
  EXPECT_EQ(error_of(k), (KeyError{"queue-2/rx-ring-ref", "missing", ENOENT}));
}

TEST(FrontendConfig, RingRefsAreStrictUnsigned32) {
  for (const char* bad : {"4294967296", "-8", "8 ", "0x8", ""}) {
    Keys k = netfront_one_queue();
    k["tx-ring-ref"] = bad;
    EXPECT_EQ(error_of(k).key, "tx-ring-ref") << '"' << bad << '"';
  }
  Keys k = netfront_one_queue();
  k["rx-ring-ref"] = "4294967295";
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->queues[0].rx_ring_ref, GrantRef{4294967295U});
}

TEST(FrontendConfig, SplitChannelsNeedBothHalves) {
  Keys k = netfront_one_queue();
  k.erase("event-channel-rx");
  k["event-channel"] = "5";  // a shared channel does not rescue half a split pair
  EXPECT_EQ(error_of(k), (KeyError{"event-channel-rx", "missing", ENOENT}));
  k.erase("event-channel-tx");
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->queues[0].evtchn_tx, Port{5});
}

TEST(FrontendConfig, MissingEventChannelAndPortZeroAreRefused) {
  Keys k = netfront_one_queue();
  k.erase("event-channel-tx");
  k.erase("event-channel-rx");
  EXPECT_EQ(error_of(k), (KeyError{"event-channel", "missing", ENOENT}));
  k["event-channel"] = "0";
  EXPECT_EQ(error_of(k).error, EINVAL);
}

TEST(FrontendConfig, CtrlRingRefRequiresItsEventChannel) {
  Keys k = netfront_one_queue();
  k["ctrl-ring-ref"] = "77";
  EXPECT_EQ(error_of(k), (KeyError{"event-channel-ctrl", "missing", ENOENT}));
  k["event-channel-ctrl"] = "13";
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->ctrl.has_value());
  EXPECT_EQ(*r->ctrl, (CtrlRingConfig{GrantRef{77}, Port{13}}));
  k["ctrl-ring-ref"] = "x";
  EXPECT_EQ(error_of(k).key, "ctrl-ring-ref");
}

TEST(FrontendConfig, CtrlKeysIgnoredWhenTheCtrlRingIsNotOffered) {
  Keys k = netfront_one_queue();
  k["ctrl-ring-ref"] = "garbage";
  auto r = parse_frontend_config(reader(k), FrontendLimits{8, false});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ctrl.has_value());
}

// Linux netfront writes xdp-headroom 0, or 256 (XDP_PACKET_HEADROOM) with an XDP program;
// netif.h caps it at 0x7FFF. A value the RX layout cannot honour is the frontend's error.
TEST(FrontendConfig, XdpHeadroomIsAbsentZeroOrAStrictDecimalThatLeavesRoomForData) {
  Keys k = netfront_one_queue();
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->xdp_headroom, 0U) << "absent means none";
  for (const auto& [value, want] :
       std::map<std::string, std::uint32_t>{{"0", 0}, {"256", 256}, {"4095", 4095}}) {
    k["xdp-headroom"] = value;
    auto v = parse_frontend_config(reader(k), kLimits);
    ASSERT_TRUE(v) << value << ": " << v.error().reason;
    EXPECT_EQ(v->xdp_headroom, want) << value;
  }
  for (const char* bad : {"4096", "32767", "32768", "65535", "4294967296", "-1", " 256", "256 ",
                          "0x100", "", "abc"}) {
    k["xdp-headroom"] = bad;
    const KeyError e = error_of(k);
    EXPECT_EQ(e.key, "xdp-headroom") << "'" << bad << "'";
    EXPECT_EQ(e.error, EINVAL) << "'" << bad << "'";
  }
  k["xdp-headroom"] = "32768";
  EXPECT_NE(error_of(k).reason.find("32767"), std::string::npos) << "names the protocol's cap";
  k["xdp-headroom"] = "8192";
  EXPECT_NE(error_of(k).reason.find("no room"), std::string::npos);
  // The Reconfiguring re-read applies the same rules on its own.
  k["xdp-headroom"] = "512";
  EXPECT_EQ(*read_xdp_headroom(reader(k)), 512U);
  k.erase("xdp-headroom");
  EXPECT_EQ(*read_xdp_headroom(reader(k)), 0U);
}

TEST(FrontendConfig, MulticastControlIsRead) {
  Keys k = netfront_one_queue();
  k["request-multicast-control"] = "1";
  auto r = parse_frontend_config(reader(k), kLimits);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->multicast_control);
}

}  // namespace
}  // namespace unetback::xenbus
