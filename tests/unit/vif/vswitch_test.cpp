// The internal switch's routing (learn, forward, flood, never back to the sender, a multicast
// group only to the vifs whose filter takes it) and the QueueLink inbox that carries packets and
// completions between queue threads.
#include "backend/vif/vswitch.hpp"

#include <gtest/gtest.h>

#include "backend/vif/flow_hash.hpp"
#include "backend/vif/queue_link.hpp"

namespace unetback::vif {
namespace {

using Clock = VSwitch::Clock;

net::MacAddress mac(std::uint8_t last) {
  return net::MacAddress{{0x00, 0x16, 0x3e, 0, 0, last}};
}
constexpr net::MacAddress kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

std::shared_ptr<SwitchPort> port_with_queues(int n) {
  auto p = std::make_shared<SwitchPort>();
  for (int i = 0; i < n; ++i) p->queues.push_back(std::make_shared<QueueLink>());
  return p;
}

TEST(VSwitch, UnknownDestinationFloodsEveryOtherPortThenUnicastOnceLearnt) {
  VSwitch sw("t");
  auto a = port_with_queues(1), b = port_with_queues(1), c = port_with_queues(1);
  const auto ia = sw.add_port(a), ib = sw.add_port(b);
  sw.add_port(c);
  VSwitch::Route r;
  const auto now = Clock::now();
  sw.route(ia, mac(1), mac(2), now, r);  // B not known yet
  EXPECT_TRUE(r.flooded);
  ASSERT_EQ(r.guests.size(), 2u);
  EXPECT_FALSE(r.uplink) << "no uplink attached";
  sw.route(ib, mac(2), mac(1), now, r);  // B answers: A was learnt
  EXPECT_FALSE(r.flooded);
  ASSERT_EQ(r.guests.size(), 1u);
  EXPECT_EQ(r.guests[0], a);
  sw.route(ia, mac(1), mac(2), now, r);
  ASSERT_EQ(r.guests.size(), 1u);
  EXPECT_EQ(r.guests[0], b);
  sw.route(ia, mac(1), kBroadcast, now, r);
  EXPECT_TRUE(r.flooded);
  EXPECT_EQ(r.guests.size(), 2u);
}

TEST(VSwitch, DestinationBehindTheSendersOwnPortIsDropped) {
  VSwitch sw("t");
  const auto ia = sw.add_port(port_with_queues(1));
  sw.add_port(port_with_queues(1));
  VSwitch::Route r;
  const auto now = Clock::now();
  sw.route(ia, mac(1), mac(9), now, r);
  sw.route(ia, mac(9), mac(1), now, r);  // mac 1 lives on ia itself
  EXPECT_TRUE(r.guests.empty());
  EXPECT_FALSE(r.uplink);
  EXPECT_EQ(sw.stats().dropped_same_port, 1u);
}

TEST(VSwitch, PortThatLeavesIsNoLongerADestination) {
  VSwitch sw("t");
  const auto ia = sw.add_port(port_with_queues(1));
  const auto ib = sw.add_port(port_with_queues(1));
  VSwitch::Route r;
  const auto now = Clock::now();
  sw.route(ib, mac(2), mac(1), now, r);
  sw.remove_port(ib);
  sw.route(ia, mac(1), mac(2), now, r);
  EXPECT_TRUE(r.flooded);
  EXPECT_TRUE(r.guests.empty());
  EXPECT_EQ(sw.ports(), 1u);
}

TEST(VSwitch, AFloodedGroupSkipsAPortWhoseMulticastFilterRefusesItAndCountsItThere) {
  VSwitch sw("t");
  auto a = port_with_queues(1), b = port_with_queues(2), c = port_with_queues(1);
  const auto ia = sw.add_port(a), ib = sw.add_port(b), ic = sw.add_port(c);
  auto filter = std::make_shared<McastFilter>();
  filter->set_enabled(true);
  const std::array<std::uint8_t, 6> joined{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
  ASSERT_TRUE(filter->add(joined));
  sw.set_rx_filter(ib, filter);
  sw.set_rx_filter(ic, nullptr);  // a vif without a filter, as before
  VSwitch::Route r;
  const auto now = Clock::now();
  sw.route(ia, mac(1), net::MacAddress{{0x01, 0x00, 0x5e, 0x04, 0x05, 0x06}}, now, r);
  EXPECT_TRUE(r.flooded);
  ASSERT_EQ(r.guests.size(), 1u) << "only the vif that does not filter";
  EXPECT_EQ(r.guests[0], c);
  ASSERT_EQ(r.filtered.size(), 1u);
  EXPECT_EQ(r.filtered[0], b);
  r.count_filtered(1);  // the queue flow hash 1 takes
  EXPECT_EQ(b->queues[1]->backlog(b->queues[1])->mcast_filtered.load(), 1u);
  EXPECT_EQ(b->queues[0]->backlog(b->queues[0])->mcast_filtered.load(), 0u);
  sw.route(ia, mac(1), net::MacAddress{joined}, now, r);
  EXPECT_EQ(r.guests.size(), 2u) << "the group it added";
  EXPECT_TRUE(r.filtered.empty());
  sw.route(ia, mac(1), kBroadcast, now, r);
  EXPECT_EQ(r.guests.size(), 2u) << "broadcast is never filtered";
  sw.route(ia, mac(1), mac(9), now, r);
  EXPECT_EQ(r.guests.size(), 2u) << "nor an unknown unicast destination";
  filter->set_enabled(false);
  sw.route(ia, mac(1), net::MacAddress{{0x01, 0x00, 0x5e, 0x04, 0x05, 0x06}}, now, r);
  EXPECT_EQ(r.guests.size(), 2u) << "a filter turned off takes every group";
  filter->set_enabled(true);
  sw.remove_port(ib);
  sw.route(ia, mac(1), net::MacAddress{{0x01, 0x00, 0x5e, 0x04, 0x05, 0x06}}, now, r);
  EXPECT_EQ(r.guests.size(), 1u);
  EXPECT_TRUE(r.filtered.empty()) << "a port gone is neither a destination nor filtered";
}

TEST(QueueLink, PacketToAStoppedQueueIsReleasedAtOnce) {
  QueueLink link;
  int released = 0;
  RxPacket p;
  auto count = [&] { ++released; };
  p.release = RxRelease::calling(&count);
  EXPECT_FALSE(link.deliver(std::move(p)));
  EXPECT_EQ(released, 1);
}

TEST(QueueLink, InboxIsScheduledOnceUntilTaken) {
  QueueLink link;
  int scheduled = 0;
  link.attach([&] { ++scheduled; });
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(link.deliver(RxPacket{}));
  link.tx_done({7, true});
  EXPECT_EQ(scheduled, 1);
  std::vector<RxPacket> rx;
  std::vector<QueueLink::TxDone> done;
  link.take(rx, done);
  EXPECT_EQ(rx.size(), 3u);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].token, 7);
  EXPECT_TRUE(link.deliver(RxPacket{}));
  EXPECT_EQ(scheduled, 2);
}

TEST(QueueLink, DetachReleasesWhatTheInboxStillHolds) {
  QueueLink link;
  link.attach([] {});
  int released = 0;
  RxPacket p;
  auto count = [&] { ++released; };
  p.release = RxRelease::calling(&count);
  EXPECT_TRUE(link.deliver(std::move(p)));
  link.detach();
  EXPECT_EQ(released, 1);
  link.tx_done({1, true});  // ignored: nobody to answer
  std::vector<RxPacket> rx;
  std::vector<QueueLink::TxDone> done;
  link.take(rx, done);
  EXPECT_TRUE(done.empty());
}

TEST(FlowHash, SameFlowSameHashOtherPortsDiffer) {
  // Ethernet + IPv4 (IHL 5, UDP) + UDP ports.
  std::array<std::byte, 42> f{};
  f[12] = std::byte{0x08};
  f[14] = std::byte{0x45};
  f[23] = std::byte{17};
  f[34] = std::byte{0x30};
  f[36] = std::byte{0x40};
  const auto h1 = flow_hash(f);
  EXPECT_EQ(h1, flow_hash(f));
  f[35] = std::byte{1};  // another source port
  EXPECT_NE(h1, flow_hash(f));
}

}  // namespace
}  // namespace unetback::vif
