// The control ring end to end on xensim: a four-queue guest sets RSS up the way win-xenvif
// does (Toeplitz, an 8-entry mapping, Microsoft's 40-byte key, all four hash types), the
// host sends five TCP flows whose Toeplitz hashes are the published verification values,
// and each flow arrives on the queue the mapping names, with a HASH extra carrying that
// hash. Then the guest re-maps while the flows keep running, and they move.
#include <array>
#include <map>

#include "backend/vif/hash.hpp"
#include "frontend-shim/ctrl_runner.hpp"
#include "tests/root/backend/backend_fixture.hpp"
#include "tests/support/figure.hpp"

namespace unetback::test {
namespace {

constexpr std::array<std::uint8_t, 40> kMsKey{
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

struct Flow {
  std::array<std::uint8_t, 4> src, dst;
  std::uint16_t sport, dport;
  std::uint32_t hash;  // the verification suite's IPv4+TCP value
};
// Microsoft's RSS verification table (IPv4 with TCP ports).
constexpr Flow kFlows[] = {
    {{66, 9, 149, 187}, {161, 142, 100, 80}, 2794, 1766, 0x51ccc178},
    {{199, 92, 111, 2}, {65, 69, 140, 83}, 14230, 4739, 0xc626b0ea},
    {{24, 19, 198, 95}, {12, 22, 207, 184}, 12898, 38024, 0x5c2b394a},
    {{38, 27, 205, 30}, {209, 142, 163, 6}, 48228, 2217, 0xafc7327f},
    {{153, 39, 163, 191}, {202, 188, 127, 2}, 44251, 1303, 0x10e828a2},
};

/// Runs control steps to their end on a loop of the test's own (this thread has no other),
/// as the shim's CtrlRunner does in its loop: the sequence's error, or none.
std::error_code run_ctrl(netfront::CtrlClient& ctrl,
                         Result<std::vector<netfront::CtrlStep>> steps) {
  if (!steps) return steps.error();
  boost::asio::io_context io;
  shim::CtrlRunner runner(io.get_executor());
  std::error_code result = std::make_error_code(std::errc::interrupted);
  if (auto ec = runner.start(ctrl, std::move(*steps), [&](std::error_code e) { result = e; }))
    return ec;
  io.run();
  return result;
}

std::vector<std::byte> flow_frame(const Flow& f, std::uint8_t seed) {
  net::FrameSpec spec;
  spec.src_ipv4 = f.src;
  spec.dst_ipv4 = f.dst;
  spec.src_port = f.sport;
  spec.dst_port = f.dport;
  spec.payload_len = 200;
  spec.payload_seed = seed;
  return net::build_frame(spec);
}

/// The flow a received frame belongs to (by its source port), or -1.
int flow_of(const std::vector<std::byte>& frame) {
  if (frame.size() < 14 + 20 + 4) return -1;
  const auto sport = static_cast<std::uint16_t>((std::to_integer<unsigned>(frame[34]) << 8) |
                                                std::to_integer<unsigned>(frame[35]));
  for (std::size_t i = 0; i < std::size(kFlows); ++i)
    if (kFlows[i].sport == sport) return static_cast<int>(i);
  return -1;
}

class CtrlRingEndToEnd : public BackendEndToEnd {
 protected:
  void SetUp() override {
    ctrl_ring_ = true;
    BackendEndToEnd::SetUp();
  }

  /// Sends `rounds` packets of every flow from the host and collects them on the guest:
  /// [flow][queue] -> packets, and whether every one carried the right HASH extra.
  std::map<int, std::map<std::uint32_t, int>> exchange(int rounds, bool& hashes_ok) {
    std::map<int, std::map<std::uint32_t, int>> seen;
    hashes_ok = true;
    int expected = 0;
    for (int r = 0; r < rounds; ++r) {
      for (const auto& f : kFlows) {
        host_send(flow_frame(f, static_cast<std::uint8_t>(r)));
        ++expected;
      }
    }
    int got = 0;
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    std::vector<netfront::RxPacket> pkts;
    while (got < expected && std::chrono::steady_clock::now() < deadline) {
      for (std::uint32_t q = 0; q < guest().netfront->num_queues(); ++q) {
        pkts.clear();
        (void)guest().netfront->handle_event(QueueId{q});
        guest().netfront->poll(pkts, QueueId{q});
        for (const auto& p : pkts) {
          const int f = flow_of(p.bytes);
          if (f < 0) continue;  // the host's own chatter (IPv6 router solicitations...)
          ++seen[f][q];
          ++got;
          if (!p.hash || p.hash->value != kFlows[f].hash ||
              p.hash->type != _XEN_NETIF_CTRL_HASH_TYPE_IPV4_TCP ||
              p.hash->algorithm != XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ)
            hashes_ok = false;
        }
      }
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(got, expected) << "every packet of every flow reaches the guest";
    return seen;
  }

  std::vector<std::uint64_t> per_queue(std::string_view name) {
    std::vector<std::uint64_t> out;
    for (const auto& q : guest().vif->report().queues) {
      for (const auto& [k, v] : q.counters)
        if (k == name) out.push_back(v);
    }
    return out;
  }
};

std::string counts(const std::vector<std::uint64_t>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : "/") + std::to_string(x);
  return s;
}

TEST_F(CtrlRingEndToEnd, FlowsLandOnTheQueuesTheMappingNamesAndMoveWhenRemapped) {
  netfront::NetfrontOptions opts;
  opts.queues = 4;
  opts.ctrl_ring = true;
  bring_up(1500, opts);
  ASSERT_EQ(guest().netfront->num_queues(), 4u);
  auto* ctrl = guest().netfront->ctrl();
  ASSERT_NE(ctrl, nullptr) << "the backend advertises feature-ctrl-ring";

  const std::vector<std::uint32_t> first{0, 1, 2, 3, 0, 1, 2, 3};
  ASSERT_FALSE(run_ctrl(*ctrl, ctrl->rss_steps(kMsKey, first, wire::kHashTypesAll)));
  bool hashes_ok = false;
  const auto before = exchange(20, hashes_ok);
  EXPECT_TRUE(hashes_ok) << "each packet carries its flow's Toeplitz hash in a HASH extra";
  for (std::size_t f = 0; f < std::size(kFlows); ++f) {
    const std::uint32_t want = first[kFlows[f].hash % first.size()];
    ASSERT_EQ(before.at(static_cast<int>(f)).size(), 1u) << "flow " << f << " on one queue";
    EXPECT_EQ(before.at(static_cast<int>(f)).begin()->first, want) << "flow " << f;
  }
  const auto rx_before = per_queue("rx_packets");
  std::cout << "[ steering ] mapping 0,1,2,3,0,1,2,3: rx_packets per queue " << counts(rx_before)
            << ", steered out " << counts(per_queue("rx_steered_out")) << "\n";

  // Re-map while traffic runs: a flow keeps sending before, during and after the change
  // (paced at a frame a millisecond, and never more than a ring's worth, so the guest, which
  // takes nothing until the end, has a buffer for every frame).
  const std::vector<std::uint32_t> second{3, 2, 1, 0, 3, 2, 1, 0};
  constexpr int kBackground = 128;
  std::atomic<bool> stop{false};
  std::atomic<int> bg_sent{0};
  std::thread traffic([&] {
    while (!stop && bg_sent < kBackground) {
      host_send(flow_frame(kFlows[0], static_cast<std::uint8_t>(bg_sent.load())));
      ++bg_sent;
      std::this_thread::sleep_for(1ms);  // pacing the sender
    }
  });
  EXPECT_TRUE(wait_for([&] { return bg_sent >= 16; })) << "the flow never started";
  const auto remap = run_ctrl(*ctrl, ctrl->mapping_steps(second));
  const int sent_at_remap = bg_sent;
  EXPECT_TRUE(wait_for([&] { return bg_sent >= std::min(sent_at_remap + 16, kBackground); }))
      << "the flow stopped";
  stop = true;
  traffic.join();
  ASSERT_FALSE(remap);
  {
    // Every frame of the background flow reaches the guest (none lost to the re-map), on the
    // queue of one table or the other; taking them all leaves nothing for the next exchange.
    int bg_got = 0;
    std::vector<netfront::RxPacket> pkts;
    EXPECT_TRUE(wait_for([&] {
      for (std::uint32_t q = 0; q < 4; ++q) {
        pkts.clear();
        (void)guest().netfront->handle_event(QueueId{q});
        guest().netfront->poll(pkts, QueueId{q});
        for (const auto& p : pkts) {
          const int f = flow_of(p.bytes);
          EXPECT_TRUE(f == 0 || f < 0) << "a frame of flow " << f << " nobody sent";
          if (f == 0) {
            ++bg_got;
            EXPECT_TRUE(q == first[kFlows[0].hash % first.size()] ||
                        q == second[kFlows[0].hash % second.size()])
                << "a frame of the flow on queue " << q;
          }
        }
      }
      return bg_got >= bg_sent;
    })) << bg_got
        << " of the flow's " << bg_sent << " frames reached the guest";
  }
  const auto rx_mid = per_queue("rx_packets");
  const auto after = exchange(20, hashes_ok);
  EXPECT_TRUE(hashes_ok);
  for (std::size_t f = 0; f < std::size(kFlows); ++f) {
    const std::uint32_t want = second[kFlows[f].hash % second.size()];
    ASSERT_EQ(after.at(static_cast<int>(f)).size(), 1u) << "flow " << f << " on one queue";
    EXPECT_EQ(after.at(static_cast<int>(f)).begin()->first, want) << "flow " << f << " moved";
    EXPECT_NE(want, first[kFlows[f].hash % first.size()]) << "the new table moves every flow";
  }
  const auto rx_after = per_queue("rx_packets");
  std::vector<std::uint64_t> delta;
  for (std::size_t q = 0; q < rx_after.size(); ++q) delta.push_back(rx_after[q] - rx_mid[q]);
  std::cout << "[ steering ] after re-map 3,2,1,0,3,2,1,0: rx_packets per queue (this round) "
            << counts(delta) << "\n";
  EXPECT_EQ(counter("ctrl_failed"), 0u);
  // Algorithm, mapping size, mapping, key, flags; then the re-map (same size: one request).
  EXPECT_EQ(counter("ctrl_requests"), 6u);
}

TEST_F(CtrlRingEndToEnd, WithoutAMappingHashedFlowsGoToHashModuloQueues) {
  netfront::NetfrontOptions opts;
  opts.queues = 4;
  opts.ctrl_ring = true;
  bring_up(1500, opts);
  auto* ctrl = guest().netfront->ctrl();
  ASSERT_NE(ctrl, nullptr);
  ASSERT_FALSE(run_ctrl(*ctrl, ctrl->rss_steps(kMsKey, {}, wire::kHashTypesAll)));
  bool hashes_ok = false;
  const auto seen = exchange(10, hashes_ok);
  EXPECT_TRUE(hashes_ok);
  for (std::size_t f = 0; f < std::size(kFlows); ++f) {
    ASSERT_EQ(seen.at(static_cast<int>(f)).size(), 1u);
    EXPECT_EQ(seen.at(static_cast<int>(f)).begin()->first, kFlows[f].hash % 4) << "flow " << f;
  }
}

TEST_F(CtrlRingEndToEnd, WithoutHashFlagsNoPacketIsHashedOrCarriesAnExtra) {
  netfront::NetfrontOptions opts;
  opts.queues = 2;
  opts.ctrl_ring = true;
  bring_up(1500, opts);
  auto* ctrl = guest().netfront->ctrl();
  ASSERT_NE(ctrl, nullptr);
  ASSERT_FALSE(run_ctrl(*ctrl, ctrl->rss_steps(kMsKey, std::vector<std::uint32_t>{1}, 0)));
  host_send(flow_frame(kFlows[0], 1));
  std::optional<netfront::RxPacket> got;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    for (std::uint32_t q = 0; q < 2 && !got; ++q) {
      std::vector<netfront::RxPacket> pkts;
      (void)guest().netfront->handle_event(QueueId{q});
      guest().netfront->poll(pkts, QueueId{q});
      for (auto& p : pkts)
        if (flow_of(p.bytes) == 0) got = std::move(p);
    }
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->hash);
  EXPECT_EQ(counter("rx_hashed"), 0u);
}

}  // namespace
}  // namespace unetback::test

namespace unetback::test {
namespace {

net::MacAddress mac_of(const std::array<std::uint8_t, 6>& a) {
  net::MacAddress m{};
  std::copy(a.begin(), a.end(), m.octets.begin());
  return m;
}

/// The multicast filter end to end (request-multicast-control, MCAST_ADD/DEL TX extras).
class MulticastFilterEndToEnd : public BackendEndToEnd {
 protected:
  static std::vector<std::byte> mcast_frame(const std::array<std::uint8_t, 6>& dst,
                                            std::uint8_t seed) {
    net::FrameSpec spec;
    spec.dst_mac = mac_of(dst);
    spec.l4 = net::L4Proto::udp;
    spec.payload_len = 100;
    spec.payload_seed = seed;
    return net::build_frame(spec);
  }
  /// Sends one frame to `dst` from the host; whether the guest got it (the hang guard, or `t`
  /// for a probe, being the limit).
  bool guest_gets(const std::array<std::uint8_t, 6>& dst, std::uint8_t seed,
                  std::chrono::milliseconds t = kHangGuard) {
    const auto f = mcast_frame(dst, seed);
    host_send(f);
    const auto deadline = std::chrono::steady_clock::now() + t;
    std::vector<netfront::RxPacket> got;
    while (std::chrono::steady_clock::now() < deadline) {
      guest().netfront->handle_event();
      got.clear();
      guest().netfront->poll(got);
      for (const auto& p : got)
        if (p.bytes == f) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }
  /// Sends a frame with `send` (which returns it); true once the backend's filter dropped it
  /// (rx_dropped_mcast_filter counts it: a positive sign, not a wait-and-see window). The
  /// guest then polls: nothing of it may have reached the guest.
  template <typename Send>
  bool guest_filters_from(Send send) {
    const auto before = counter("rx_dropped_mcast_filter");
    const auto f = send();
    const bool dropped = wait_for([&] { return counter("rx_dropped_mcast_filter") > before; });
    guest().netfront->handle_event();
    std::vector<netfront::RxPacket> got;
    guest().netfront->poll(got);
    for (const auto& p : got)
      if (p.bytes == f) return false;
    return dropped;
  }
  /// guest_filters_from for one frame to `dst` from the host.
  bool guest_filters(const std::array<std::uint8_t, 6>& dst, std::uint8_t seed) {
    return guest_filters_from([&] {
      auto f = mcast_frame(dst, seed);
      host_send(f);
      return f;
    });
  }
  /// A dummy request carrying an MCAST_ADD/DEL extra (as win-xenvif sends them).
  void mcast(bool add, const std::array<std::uint8_t, 6>& addr) {
    netfront::TxMeta meta;
    meta.mcast = netfront::TxMeta::Mcast{add, addr};
    const netfront::RawTxSlot slot{0, 0};
    ASSERT_TRUE(guest().netfront->send_raw(std::span(&slot, 1), {}, meta).has_value());
    // Answered once the backend has applied (or refused) it.
    ASSERT_TRUE(guest_settle_all()) << "the MCAST request was never answered";
  }
};

constexpr std::array<std::uint8_t, 6> kGroupA{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
constexpr std::array<std::uint8_t, 6> kGroupB{0x01, 0x00, 0x5e, 0x04, 0x05, 0x06};
constexpr std::array<std::uint8_t, 6> kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

TEST_F(MulticastFilterEndToEnd, GuestGetsTheGroupItAddedAndNoOther) {
  bring_up();
  // Without request-multicast-control every group passes.
  EXPECT_TRUE(guest_gets(kGroupB, 1));
  auto xs = guest().hv->open_xenstore();
  ASSERT_FALSE(xs->write(guest().netfront->frontend_dir() + "/request-multicast-control", "1"));
  // The key is watched (feature-dynamic-multicast-control): the filter applies once the
  // backend has read it; a probe a 100 ms until the backend counts one filtered.
  ASSERT_TRUE(wait_for([&] {
    const auto before = counter("rx_dropped_mcast_filter");
    host_send(mcast_frame(kGroupB, 10));
    return wait_for([&] { return counter("rx_dropped_mcast_filter") > before; }, 100ms);
  })) << "request-multicast-control=1 never took effect";
  mcast(true, kGroupA);
  EXPECT_TRUE(guest_gets(kGroupA, 2)) << "the added group";
  EXPECT_TRUE(guest_filters(kGroupB, 3)) << "a group the guest did not add";
  EXPECT_TRUE(guest_gets(kBroadcast, 4)) << "broadcast is never filtered";
  EXPECT_TRUE(guest_gets({0x00, 0x16, 0x3e, 0x00, 0x00, 0x02}, 5)) << "unicast";
  EXPECT_GE(counter("rx_dropped_mcast_filter"), 2u);

  // 64 entries: A and 63 more fit, the 65th add is refused and changes nothing.
  for (std::uint8_t i = 0; i < 63; ++i) mcast(true, {0x01, 0x00, 0x5e, 0x7f, 0x00, i});
  EXPECT_EQ(counter("tx_mcast_refused"), 0u);
  mcast(true, kGroupB);
  EXPECT_EQ(counter("tx_mcast_refused"), 1u) << "Linux: -ENOSPC, answered ERROR";
  EXPECT_TRUE(guest_filters(kGroupB, 6));
  // A delete frees an entry; deleting A stops its frames.
  mcast(false, kGroupA);
  EXPECT_TRUE(guest_filters(kGroupA, 7));
  mcast(true, kGroupB);
  EXPECT_TRUE(guest_gets(kGroupB, 8));
  // Filter off again: every group passes, the list kept. A (deleted from the list) gets
  // through once the backend has read the key; until then each probe is filtered.
  ASSERT_FALSE(xs->write(guest().netfront->frontend_dir() + "/request-multicast-control", "0"));
  EXPECT_TRUE(wait_for([&] { return guest_gets(kGroupA, 9, 100ms); }))
      << "request-multicast-control=0 never took effect";
}

/// The multicast filter on the daemon's internal switch: a guest on a switch gets a group it did
/// not add from another guest on that switch, or from the switch's uplink, no more than it gets
/// it from its own TAP; the drops are counted where the TAP's are (rx_dropped_mcast_filter).
class SwitchMulticastFilterEndToEnd : public MulticastFilterEndToEnd {
 protected:
  static constexpr const char* kUplink = "ubmc-up";
  void SetUp() override {
    MulticastFilterEndToEnd::SetUp();
    if (IsSkipped()) return;
    switches_ =
        std::make_unique<vif::SwitchRegistry>(std::map<std::string, std::string>{{"mc", kUplink}});
    ASSERT_EQ(0, std::system((std::string("ip link set ") + kUplink + " up").c_str()));
    uplink_ = test::PacketSocket::open(kUplink);
    ASSERT_TRUE(uplink_.valid()) << std::strerror(errno);
  }
  /// A guest on switch "mc" with B:mac `mac`, connected.
  void join(Guest& g, const std::string& mac) {
    toolstack::VifSpec spec;
    spec.mac = mac;
    spec.bridge = "unetback:mc";
    add_vif(g, spec);
    run_hotplug(g);
    connect_guest(g);
    ASSERT_FALSE(wait_state(g, XenbusState::connected));
  }
  /// A frame for `dst` from the other guest on the switch (its B:mac is the frame's source).
  std::vector<std::byte> from_peer(const std::array<std::uint8_t, 6>& dst, std::uint8_t seed) {
    auto f = mcast_frame(dst, seed);
    EXPECT_TRUE(peer().netfront->send(f).has_value());
    return f;
  }
  /// A frame for `dst` from the host, through the switch's uplink (from a MAC of its own).
  std::vector<std::byte> from_uplink(const std::array<std::uint8_t, 6>& dst, std::uint8_t seed) {
    net::FrameSpec spec;
    spec.dst_mac = mac_of(dst);
    spec.src_mac = mac_of({0x00, 0x16, 0x3e, 0x00, 0x00, 0x0c});
    spec.l4 = net::L4Proto::udp;
    spec.payload_len = 100;
    spec.payload_seed = seed;
    auto f = net::build_frame(spec);
    EXPECT_TRUE(uplink_.send(f));
    return f;
  }
  /// Whether the guest got frame `f` (sent already) within the hang guard.
  bool guest_got(const std::vector<std::byte>& f) {
    return wait_for([&] {
      guest().netfront->handle_event();
      std::vector<netfront::RxPacket> got;
      guest().netfront->poll(got);
      for (const auto& p : got)
        if (p.bytes == f) return true;
      return false;
    });
  }
  Guest& peer() { return guest(1); }
  test::PacketSocket uplink_;
};

TEST_F(SwitchMulticastFilterEndToEnd, AGroupTheGuestDidNotAddReachesItFromNoPortOfTheSwitch) {
  join(guest(), "00:16:3e:00:00:0b");
  join(new_guest(), "00:16:3e:00:00:01");  // the frames' source MAC (FrameSpec's)
  // Without request-multicast-control every group passes, from the other guest and the uplink.
  EXPECT_TRUE(guest_got(from_peer(kGroupB, 1)));
  EXPECT_TRUE(guest_got(from_uplink(kGroupB, 2)));
  auto xs = guest().hv->open_xenstore();
  ASSERT_FALSE(xs->write(guest().netfront->frontend_dir() + "/request-multicast-control", "1"));
  // Once the backend has read the key, its own TAP's frames of a group not added are dropped.
  open_packet_socket(guest());
  ASSERT_TRUE(wait_for([&] {
    const auto before = counter("rx_dropped_mcast_filter");
    host_send(mcast_frame(kGroupB, 10));
    return wait_for([&] { return counter("rx_dropped_mcast_filter") > before; }, 100ms);
  })) << "request-multicast-control=1 never took effect";
  // Through the switch too.
  EXPECT_TRUE(guest_filters_from([&] { return from_peer(kGroupB, 3); }))
      << "a group the guest did not add, from another guest on the switch";
  EXPECT_TRUE(guest_filters_from([&] { return from_uplink(kGroupB, 4); }))
      << "a group the guest did not add, from the switch's uplink";
  mcast(true, kGroupA);
  EXPECT_TRUE(guest_got(from_peer(kGroupA, 5))) << "the added group, from the other guest";
  EXPECT_TRUE(guest_got(from_uplink(kGroupA, 6))) << "the added group, from the uplink";
  EXPECT_TRUE(guest_got(from_peer(kBroadcast, 7))) << "broadcast is never filtered";
  EXPECT_TRUE(guest_filters_from([&] { return from_peer(kGroupB, 8); }));
  EXPECT_TRUE(guest_settle_all(peer())) << "the sender's requests are all answered";
}

}  // namespace
}  // namespace unetback::test
