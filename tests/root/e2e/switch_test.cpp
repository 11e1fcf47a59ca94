// unetbackd's internal switch (suite e2e, root): guests whose vif says bridge=unetback:sw0 talk
// to each other through the daemon alone — A's TX ring to B's RX ring, one grant copy from A's
// pages to B's buffers — and to the host through the switch's uplink TAP. Scenarios: VM->VM
// traffic (zerocopy, minimal slots, no kernel on the path), the uplink, a receiver too slow for
// its sender (the pending limit falls back to copying, so the sender's other flow goes on; with
// zerocopy-fallback=0 it stalls), and vifs torn down while their packets, or packets for them,
// wait in another vif's queue.
#include <gtest/gtest.h>
#include <iostream>

#include "tests/root/e2e/e2e_fixture.hpp"

namespace unetback {
namespace {

using namespace std::chrono_literals;
using testing::Daemon;
using testing::EndToEnd;
using testing::RunResult;
using testing::sum_counter;
using testing::XlWorld;

constexpr const char* kSwitch = "unetback:sw0";
constexpr const char* kUplink = "usw0";

/// A world whose daemon has switch sw0 with uplink TAP usw0; the host address moves from the
/// Linux bridge (unused here) to the uplink.
class SwitchEndToEnd : public EndToEnd {
 protected:
  std::string tag() const override { return "ubsw"; }
  std::string subnet() const override { return "10.95.0"; }
  std::vector<std::string> daemon_args() const override {
    std::vector<std::string> a{"--switch-uplink", std::string("sw0=") + kUplink};
    a.insert(a.end(), extra_daemon_args_.begin(), extra_daemon_args_.end());
    return a;
  }
  void SetUp() override {
    EndToEnd::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string ns = w().ns0();
    ASSERT_TRUE(w().link_exists(ns, kUplink)) << w().daemon().log();
    ASSERT_EQ(
        testing::run({"ip", "-n", ns, "addr", "flush", "dev", XlWorld::kBridge}, "/tmp").status, 0);
    ASSERT_EQ(
        testing::run({"ip", "-n", ns, "addr", "add", w().host_ip() + "/24", "dev", kUplink}, "/tmp")
            .status,
        0);
    ASSERT_EQ(testing::run({"ip", "-n", ns, "link", "set", kUplink, "up"}, "/tmp").status, 0);
  }
  std::optional<XlWorld::Guest> guest(int n, const std::vector<std::string>& shim_args = {}) {
    return w().create_guest(n, shim_args, {}, kSwitch);
  }
  /// An iperf3 server in guest `g`'s namespace.
  void serve_iperf_in(const XlWorld::Guest& g, int port) {
    Daemon& d = w().spawn_in_ns(g.ns, {"iperf3", "-s", "--forceflush", "-p", std::to_string(port)},
                                "iperf3-" + g.name + "-" + std::to_string(port) + ".log");
    ASSERT_TRUE(d.wait_for("Server listening", 10s)) << d.log();
  }
  /// The kernel's count of packets the host side of `tap` received (= guest TX that reached
  /// the host stack through the vif's own TAP).
  std::uint64_t tap_rx_packets(const std::string& tap) {
    const RunResult r = testing::run({"ip", "netns", "exec", w().ns0(), "cat",
                                      "/sys/class/net/" + tap + "/statistics/tx_packets"},
                                     "/tmp");
    return std::strtoull(r.out.c_str(), nullptr, 10);
  }

  /// unetback-udpflow sending `size`-byte UDP payloads to `to` (IP:PORT) for `secs` seconds.
  static std::vector<std::string> udp_send(const std::string& to, int size, int secs,
                                           std::vector<std::string> extra = {}) {
    std::vector<std::string> a{
        udpflow_bin(),       "send", "--to", to, "--size", std::to_string(size), "--seconds",
        std::to_string(secs)};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static std::string udpflow_bin() {
    return testing::env_or("UNETBACK_UDPFLOW_BIN", UNETBACK_UDPFLOW_BIN_DEFAULT);
  }

  /// The share of `pps` paced `size`-byte UDP packets a second, sent for `secs` seconds from
  /// namespace `from_ns` to `to_ip`:`port`, that a receiver in `to_ns` counted (received /
  /// sent); -1 when a tool failed. Paced flows measure loss, not the CPU share a sender got.
  double delivery(const std::string& from_ns, const std::string& to_ns, const std::string& to_ip,
                  int port, int secs, int pps, int size) {
    Daemon& recv =
        w().spawn_in_ns(to_ns,
                        {udpflow_bin(), "recv", "--port", std::to_string(port), "--seconds",
                         std::to_string(secs + 1), "--from-start", "--json"},
                        "recv-" + std::to_string(port) + ".json");
    std::this_thread::sleep_for(200ms);  // bound before the first packet
    const RunResult sent = w().in_ns(from_ns,
                                     udp_send(to_ip + ":" + std::to_string(port), size, secs,
                                              {"--pps", std::to_string(pps), "--json"}),
                                     30s);
    const auto st = recv.wait_exit(20s);
    if (sent.status != 0 || !st || *st != 0) return -1;
    const auto n = [](const std::string& json) {
      const auto at = json.find("\"packets\":");
      return at == std::string::npos ? -1.0 : std::strtod(json.c_str() + at + 10, nullptr);
    };
    const double s = n(sent.out), r = n(recv.log());
    if (s <= 0 || r < 0) return -1;
    return r / s;
  }
  /// delivery() of 100-byte packets from the host to guest `to`.
  double host_to_guest_delivery(const XlWorld::Guest& to, int port, int secs, int n_pps) {
    return delivery(w().ns0(), to.ns, to.ip, port, secs, n_pps, 100);
  }

  /// Seed 000's experiment in small: guest 1 sends 2000 1-byte packets a second to the host;
  /// then the same while it also sends 10000 1400-byte packets a second at guest 2, which
  /// takes only 100 a second, so guest 1's zerocopy packets reach the pending limit within a
  /// second. The small flow's delivered share beside that flood, divided by its share alone.
  /// Both flows are paced: unpaced, the two senders' share of a loaded 2-CPU machine decided
  /// the ratio (0.06-1.5 in CI); the bench's seed-000 experiment measures the unpaced rates.
  double small_flow_ratio_past_a_slow_receiver() {
    auto g1 = guest(1);
    auto g2 = guest(2, {"--rx-rate", "100"});
    if (!g1 || !g2) return -1;
    if (!ping(g1->ns, g2->ip, 1) || !ping(g1->ns, w().host_ip(), 1)) return -1;
    const double alone = delivery(g1->ns, w().ns0(), w().host_ip(), 5400, 2, 2000, 1);
    Daemon& large = w().spawn_in_ns(g1->ns, udp_send(g2->ip + ":5401", 1400, 8, {"--pps", "10000"}),
                                    "large.log");
    std::this_thread::sleep_for(1s);
    const double together = delivery(g1->ns, w().ns0(), w().host_ip(), 5402, 2, 2000, 1);
    large.signal(SIGKILL);
    const std::string s = stats();
    std::cout << "small flow delivered alone " << alone << ", beside the flood to a slow guest "
              << together << "; zerocopy " << sum_counter(s, "tx_zerocopy") << ", copied "
              << sum_counter(s, "tx_copied") << " (for the limit "
              << sum_counter(s, "tx_copy_for_limit") << "), stalls " << sum_counter(s, "tx_stalls")
              << "\n";
    if (alone <= 0 || together < 0) return -1;
    return together / alone;
  }

  /// Writes a key of guest `g`'s vif backend directory, as the toolstack would.
  bool write_backend_key(const XlWorld::Guest& g, const std::string& key, const std::string& v) {
    const std::string path = "/local/domain/0/backend/vif/" + std::to_string(g.domid) + "/0/" + key;
    return testing::run(
               {"env", "XENSTORED_PATH=" + w().world() + "/dom0.sock", "xenstore-write", path, v},
               "/tmp")
               .status == 0;
  }

  std::vector<std::string> extra_daemon_args_;
};

/// The same world with zerocopy-fallback=0: TX stops at the pending limit (pre-2017 vhost).
class StallingSwitchEndToEnd : public SwitchEndToEnd {
 protected:
  StallingSwitchEndToEnd() { extra_daemon_args_ = {"--zerocopy-fallback", "0"}; }
};

/// Every queue on one event-loop thread, and guest-RX queues at their smallest cap: packets are
/// dropped (and their senders' zerocopy slots completed) inside the very handler that serves
/// another queue's TX.
class OneThreadSwitchEndToEnd : public SwitchEndToEnd {
 protected:
  OneThreadSwitchEndToEnd() {
    extra_daemon_args_ = {"--threads", "1", "--rx-queue-bytes", "65536"};
  }
};

TEST_F(OneThreadSwitchEndToEnd,
       Xsa424_CompletionsDuringTheSendersOwnPassNeitherDeadlockNorReenter) {
  // XSA-424: freeing a packet under the response lock re-entered the lock. Here each guest's
  // zerocopy packets are completed by the other's queue on the same thread while that thread
  // is in the middle of a TX or RX pass; completions go through the queue's inbox, never
  // straight into a running pass.
  const std::size_t fds_before = testing::open_fds(w().daemon().pid());
  auto g1 = guest(1);
  ASSERT_TRUE(g1) << w().why();
  auto g2 = guest(2);
  ASSERT_TRUE(g2) << w().why();
  ASSERT_TRUE(ping(g1->ns, g2->ip, 1));
  Daemon& f12 = w().spawn_in_ns(g1->ns, udp_send(g2->ip + ":5501", 1400, 8), "f12.log");
  Daemon& f21 = w().spawn_in_ns(g2->ns, udp_send(g1->ip + ":5502", 1400, 8), "f21.log");
  // The daemon keeps answering throughout (a deadlocked data thread would not stop the
  // control thread, but a stuck vif would show in `stats`, which asks the queue's thread).
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string s = stats();
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_NE(s.find("\"vifs\""), std::string::npos) << "no answer at probe " << i;
    EXPECT_LT(took, 2s) << "a queue thread did not answer at probe " << i;
    std::this_thread::sleep_for(200ms);
  }
  const std::string s = stats();
  // A full receiver's packets are dropped at its cap or, mostly, by the sender before it
  // copies them (seed 000).
  EXPECT_GT(sum_counter(s, "rx_dropped_queue_full") + sum_counter(s, "tx_switch_full"), 0U)
      << "no packet dropped: " << s;
  EXPECT_GT(sum_counter(s, "tx_zerocopy"), 1000U) << s;
  // Both go while their floods still run: completions in flight on the one thread.
  ASSERT_EQ(w().destroy_guest(*g1).status, 0);
  ASSERT_EQ(w().destroy_guest(*g2).status, 0);
  f12.signal(SIGKILL);
  f21.signal(SIGKILL);
  EXPECT_TRUE(wait_vif_count(0, 10s)) << list();
  EXPECT_FALSE(w().daemon().wait_exit(0ms).has_value()) << "unetbackd died";
  EXPECT_EQ(testing::open_fds(w().daemon().pid()), fds_before);
  EXPECT_EQ(sum_counter(stats(), "mapped_grant_pages"), 0U);
}

TEST_F(SwitchEndToEnd, GuestsOnTheSwitchReachEachOtherThroughTheDaemonAloneZerocopy) {
  auto g1 = guest(1);
  ASSERT_TRUE(g1) << w().why();
  auto g2 = guest(2);
  ASSERT_TRUE(g2) << w().why();
  EXPECT_TRUE(ping(g1->ns, g2->ip)) << "guest 1 cannot ping guest 2 through the switch";
  serve_iperf_in(*g2, 5301);
  const std::uint64_t tap_before = tap_rx_packets(g1->tap());
  const RunResult r =
      w().in_ns(g1->ns, {"iperf3", "-c", g2->ip, "-p", "5301", "-t", "3", "-J"}, 40s);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const double bps = testing::iperf_bits_per_second(r.out);
  std::cout << "guest->guest through the switch: " << bps / 1e9 << " Gbit/s\n";
  RecordProperty("guest_to_guest_mbit_s", static_cast<int>(bps / 1e6));
  EXPECT_GT(bps, 5e8);

  const std::string s = stats();
  const std::uint64_t switched = sum_counter(s, "tx_switched");
  EXPECT_GT(switched, 10000U) << s;
  // The data went zerocopy (the sender's grant refs, copied once by the receiver's path).
  EXPECT_GT(sum_counter(s, "tx_zerocopy"), switched / 2) << s;
  EXPECT_GT(sum_counter(s, "rx_switch_packets"), 10000U) << s;
  EXPECT_EQ(sum_counter(s, "rx_slots"), sum_counter(s, "rx_min_slots")) << s;
  // Nothing of it went through the kernel: the vif's own TAP saw (next to) nothing.
  EXPECT_LT(tap_rx_packets(g1->tap()) - tap_before, 50U);
  EXPECT_EQ(sum_counter(s, "rx_copy_errors"), 0U) << s;
}

TEST_F(SwitchEndToEnd, TheUplinkConnectsTheSwitchToTheHostBothWays) {
  auto g1 = guest(1);
  ASSERT_TRUE(g1) << w().why();
  EXPECT_TRUE(ping(g1->ns, w().host_ip())) << "guest cannot reach the host through the uplink";
  serve_iperf(5302);
  const RunResult up = iperf(*g1, 5302, 2);
  ASSERT_EQ(up.status, 0) << up.out << up.err;
  const RunResult down = iperf(*g1, 5302, 2, /*reverse=*/true);
  ASSERT_EQ(down.status, 0) << down.out << down.err;
  const double up_bps = testing::iperf_bits_per_second(up.out);
  const double down_bps = testing::iperf_bits_per_second(down.out);
  std::cout << "uplink: guest->host " << up_bps / 1e9 << " Gbit/s, host->guest " << down_bps / 1e9
            << " Gbit/s\n";
  EXPECT_GT(up_bps, 1e8);
  EXPECT_GT(down_bps, 1e8);
  EXPECT_GT(sum_counter(stats(), "tx_switch_uplink"), 1000U);
}

TEST_F(SwitchEndToEnd, ASlowReceiverDoesNotStallTheSendersOtherFlowThePendingLimitCopies) {
  const double ratio = small_flow_ratio_past_a_slow_receiver();
  ASSERT_GE(ratio, 0) << "a tool failed";
  RecordProperty("small_flow_ratio_x1000", static_cast<int>(ratio * 1000));
  // Seed 000: with the fallback the small flow keeps its packets (1.0 idle, 0.88-1.0 beside
  // four busy loops on 2 CPUs; 0 without it). Generous for a noisy machine.
  EXPECT_GT(ratio, 0.5);
  EXPECT_GT(sum_counter(stats(), "tx_copy_for_limit"), 0U) << "the limit never applied";
}

TEST_F(StallingSwitchEndToEnd, WithoutTheFallbackTheSlowReceiverStallsTheSendersOtherFlow) {
  // The behaviour the fallback fixes, so the comparison above measures something.
  const double ratio = small_flow_ratio_past_a_slow_receiver();
  ASSERT_GE(ratio, 0) << "a tool failed";
  RecordProperty("small_flow_ratio_x1000", static_cast<int>(ratio * 1000));
  EXPECT_LT(ratio, 0.1);
  EXPECT_GT(sum_counter(stats(), "tx_stalls"), 0U);
  EXPECT_EQ(sum_counter(stats(), "tx_copy_for_limit"), 0U);
}

TEST_F(SwitchEndToEnd, VifsTornDownWithPacketsWaitingInAnotherVifsQueueLeaveNothingBehind) {
  const std::size_t fds_before = testing::open_fds(w().daemon().pid());
  auto g1 = guest(1);
  ASSERT_TRUE(g1) << w().why();
  // Guest 2 takes 20 packets a second: guest 1's zerocopy packets pile up in its queue.
  auto g2 = guest(2, {"--rx-rate", "20"});
  ASSERT_TRUE(g2) << w().why();
  auto g3 = guest(3);
  ASSERT_TRUE(g3) << w().why();
  ASSERT_TRUE(ping(g1->ns, g2->ip, 1));
  ASSERT_TRUE(ping(g1->ns, g3->ip, 1));
  serve_iperf_in(*g3, 5303);
  Daemon& flood = w().spawn_in_ns(g1->ns, udp_send(g2->ip + ":5304", 1400, 30), "flood.log");
  std::this_thread::sleep_for(1500ms);
  std::string s = stats();
  EXPECT_GT(sum_counter(s, "tx_zerocopy_in_flight"), 0U) << "no packet of guest 1 waits: " << s;

  // The receiver goes with guest 1's packets in its queue: they are dropped and guest 1's
  // slots answered, so guest 1 goes on (to guest 3).
  ASSERT_EQ(w().destroy_guest(*g2).status, 0);
  EXPECT_TRUE(wait_vif_count(2, 10s)) << list();
  flood.signal(SIGKILL);  // (its packets, now for an unknown MAC, would be flooded to guest 3)
  const RunResult to3 =
      w().in_ns(g1->ns, {"iperf3", "-c", g3->ip, "-p", "5303", "-t", "2", "-J"}, 30s);
  EXPECT_EQ(to3.status, 0) << to3.out << to3.err;
  EXPECT_GT(testing::iperf_bits_per_second(to3.out), 1e8);

  // Now the sender goes while its packets wait in a slow receiver's queue: the receiver drops
  // them (their grants may be revoked) and keeps working.
  auto g4 = guest(4, {"--rx-rate", "20"});
  ASSERT_TRUE(g4) << w().why();
  ASSERT_TRUE(ping(g1->ns, g4->ip, 1));
  Daemon& flood2 = w().spawn_in_ns(g1->ns, udp_send(g4->ip + ":5305", 1400, 30), "flood2.log");
  std::this_thread::sleep_for(1500ms);
  s = stats();
  EXPECT_GT(sum_counter(s, "tx_zerocopy_in_flight"), 0U) << "no packet of guest 1 waits: " << s;
  ASSERT_EQ(w().destroy_guest(*g1).status, 0);
  flood2.signal(SIGKILL);
  EXPECT_TRUE(wait_vif_count(2, 10s)) << list();
  // Its zerocopy packets are dropped, not copied from grants that may be gone; the copies
  // behind them are still delivered, slowly (its queue is its own problem).
  bool dropped = false;
  for (int i = 0; i < 50 && !dropped; ++i) {
    dropped = sum_counter(stats(), "rx_dropped_source_gone") > 0;
    if (!dropped) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(dropped) << "before: " << s << "\nafter: " << stats();
  EXPECT_TRUE(ping(g3->ns, w().host_ip(), 2)) << "guest 3 lost the uplink";

  ASSERT_EQ(w().destroy_guest(*g3).status, 0);
  ASSERT_EQ(w().destroy_guest(*g4).status, 0);
  EXPECT_TRUE(wait_vif_count(0, 10s)) << list();
  EXPECT_EQ(testing::open_fds(w().daemon().pid()), fds_before);
  s = stats();
  EXPECT_EQ(sum_counter(s, "mapped_grant_pages"), 0U) << s;
  EXPECT_FALSE(w().daemon().wait_exit(0ms).has_value()) << "unetbackd died";
}

TEST_F(SwitchEndToEnd, AGuestSendingFromAnotherGuestsMacIsDroppedAndCannotTakeItsTraffic) {
  // Issue 15: guest 1 sends with guest 2's B:mac as source. A learning switch would move that
  // MAC to guest 1's port and hand it guest 2's traffic; the switch drops such frames (never
  // learning from them) unless the toolstack set unetback-allow-mac-spoofing=1 for the vif.
  auto g1 = guest(1);
  ASSERT_TRUE(g1) << w().why();
  auto g2 = guest(2);
  ASSERT_TRUE(g2) << w().why();
  const std::string g2_mac = "00:16:3e:00:00:02";  // create_guest's MAC for guest 2
  ASSERT_TRUE(ping(g2->ns, w().host_ip(), 1));
  ASSERT_TRUE(ping(g1->ns, w().host_ip(), 1));
  const double alone = host_to_guest_delivery(*g2, 5601, 2, 2000);
  ASSERT_GT(alone, 0) << "host->guest 2 failed before any spoofing";

  // Guest 1 takes guest 2's MAC and floods the host with it (a fixed neighbour entry, so it
  // needs no ARP answer).
  const std::string uplink_mac = [&] {
    std::string m =
        w().in_ns(w().ns0(), {"cat", std::string("/sys/class/net/") + kUplink + "/address"}).out;
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  }();
  ASSERT_EQ(w().in_ns(g1->ns, {"ip", "link", "set", "eth0", "address", g2_mac}).status, 0);
  ASSERT_EQ(w().in_ns(g1->ns, {"ip", "neigh", "replace", w().host_ip(), "lladdr", uplink_mac, "dev",
                               "eth0", "nud", "permanent"})
                .status,
            0);
  const auto spoofed_before = sum_counter(stats(), "tx_dropped_spoofed");
  Daemon& flood = w().spawn_in_ns(
      g1->ns, udp_send(w().host_ip() + ":5602", 200, 6, {"--pps", "20000"}), "spoof-flood.log");
  std::this_thread::sleep_for(500ms);
  const double filtered = host_to_guest_delivery(*g2, 5603, 3, 2000);
  const auto spoofed = sum_counter(stats(), "tx_dropped_spoofed") - spoofed_before;
  flood.signal(SIGKILL);
  std::cout << "host->guest 2: alone " << alone << ", while guest 1 spoofs its MAC " << filtered
            << " delivered; " << spoofed << " spoofed frames dropped\n";
  RecordProperty("delivered_while_spoofed_x1000", static_cast<int>(filtered * 1000));
  EXPECT_GT(filtered, 0.5) << "guest 1 took guest 2's traffic";
  EXPECT_GT(spoofed, 1000U) << "the spoofed frames were not counted";

  // With the key set for guest 1's vif, the switch learns whatever it sends again: guest 2's
  // MAC moves to guest 1's port, and guest 2 loses its traffic (the old behaviour).
  ASSERT_TRUE(write_backend_key(*g1, "unetback-allow-mac-spoofing", "1"));
  std::this_thread::sleep_for(300ms);
  const auto spoofed_allowed_before = sum_counter(stats(), "tx_dropped_spoofed");
  Daemon& flood2 = w().spawn_in_ns(
      g1->ns, udp_send(w().host_ip() + ":5604", 200, 6, {"--pps", "20000"}), "spoof-flood2.log");
  std::this_thread::sleep_for(500ms);
  const double allowed = host_to_guest_delivery(*g2, 5605, 3, 2000);
  const auto spoofed_allowed = sum_counter(stats(), "tx_dropped_spoofed") - spoofed_allowed_before;
  flood2.signal(SIGKILL);
  std::cout << "with unetback-allow-mac-spoofing=1: " << allowed << " delivered, "
            << spoofed_allowed << " dropped\n";
  EXPECT_LT(allowed, 0.3) << "allowed spoofing should take guest 2's MAC over";
  EXPECT_EQ(spoofed_allowed, 0U);
  EXPECT_FALSE(w().daemon().wait_exit(0ms).has_value()) << "unetbackd died";
}

}  // namespace
}  // namespace unetback
