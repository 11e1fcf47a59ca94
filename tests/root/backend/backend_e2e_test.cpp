// The backend end to end, in one process over a real xensim: libxl's vif nodes (tools/xl),
// the backend's xenbus state machine driving a real Vif (rings, grant copies, event
// channels, a multi-queue TAP), and the userspace Netfront as the guest. The host side is
// the TAP `vif<domid>.0` in a private network namespace, read and written through an
// AF_PACKET socket. Needs root (TAP, namespace): suite root-netns.
#include <arpa/inet.h>
#include <atomic>
#include <cstring>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "backend/vif/vif.hpp"
#include "backend/xenbus/xenbus_adapter.hpp"
#include "common/hv/sim/sim_grant_sharer.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/net/frame_builder.hpp"
#include "common/net/linux_virtio_net.hpp"
#include "frontend-shim/netfront.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback {
namespace {

using namespace std::chrono_literals;

bool in_private_netns = false;

class BackendEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0 || ::access("/dev/net/tun", R_OK | W_OK) != 0) return;
    // The whole test process moves to a namespace of its own: the TAPs it creates never
    // touch the machine's network, and vanish with the process.
    if (!in_private_netns && ::unshare(CLONE_NEWNET) == 0) {
      in_private_netns = true;
      (void)std::system("ip link set lo up");
      // No IPv6 in this namespace: a TAP coming up would otherwise send its own neighbour
      // discovery frames to the guest, mixed with the test's.
      (void)std::system(
          "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
          "net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1");
    }
  }

  void SetUp() override {
    if (!in_private_netns) GTEST_SKIP() << "needs root and /dev/net/tun (suite root-netns)";
    world_ = std::make_unique<test::XensimProcess>();
    hv::HypervisorOptions be;
    be.role = hv::Role::backend;
    dom0_ = std::make_unique<hv::SimHypervisor>(world_->dir(), be);
    hv::HypervisorOptions fe;
    fe.role = hv::Role::frontend;
    fe.name = "guest";
    domu_ = std::make_unique<hv::SimHypervisor>(world_->dir(), fe);
    fe_dom_ = domu_->self();
    toolstack_xs_ = dom0_->open_xenstore();
    backend_xs_ = dom0_->open_xenstore();
    loops_ = std::make_unique<vif::EventLoopPool>(2);
  }

  void TearDown() override {
    if (netfront_) netfront_->disconnect(1s);
    netfront_.reset();
    if (toolstack_xs_ && vif_)
      (void)toolstack::remove_vif(*toolstack_xs_, kDom0, fe_dom_, DevId{0});
    stop_pump();
    xenbus_.reset();
    vif_.reset();
    loops_.reset();
    backend_xs_.reset();
    toolstack_xs_.reset();
    domu_.reset();
    dom0_.reset();
    world_.reset();
  }

  /// The toolstack adds the vif; the backend probes it (TAP, features, InitWait).
  void add_vif(toolstack::VifSpec spec = {}, daemon::Tunables tunables = {}) {
    ASSERT_FALSE(toolstack::add_vif(*toolstack_xs_, kDom0, fe_dom_, spec));
    vif_ = std::make_unique<vif::Vif>(*dom0_, *loops_, fe_dom_, spec.devid, tunables, nullptr);
    xenbus_ = std::make_unique<xenbus::BackendXenbus>(
        *backend_xs_, kDom0, fe_dom_, spec.devid, *vif_,
        xenbus::FeatureOptions{tunables.max_queues, true, false});
    ASSERT_FALSE(xenbus_->start());
    start_pump();
    ASSERT_FALSE(wait_state("2")) << "no InitWait within libxl's 10 s";
  }

  /// What vif-bridge does: the TAP up, then hotplug-status=connected.
  void run_hotplug(std::uint32_t mtu = 1500) {
    ASSERT_NE(::if_nametoindex(tap_name().c_str()), 0u) << "no TAP before InitWait";
    ASSERT_EQ(
        0,
        std::system(("ip link set " + tap_name() + " mtu " + std::to_string(mtu) + " up").c_str()));
    ASSERT_FALSE(toolstack_xs_->write(be_path() + "/hotplug-status", "connected"));
  }

  void connect_guest(netfront::NetfrontOptions opts = {}) {
    netfront_ = std::make_unique<netfront::Netfront>(*domu_, opts);
    ASSERT_FALSE(netfront_->connect(5s));
  }

  void bring_up(std::uint32_t mtu = 1500, netfront::NetfrontOptions opts = {},
                daemon::Tunables tunables = {}) {
    add_vif({}, tunables);
    run_hotplug(mtu);
    connect_guest(opts);
    ASSERT_FALSE(wait_state("4"));
    open_packet_socket();
  }

  std::error_code wait_state(std::string_view s, std::chrono::milliseconds t = 10s) {
    return toolstack::wait_for_value(*toolstack_xs_, be_path() + "/state", s, t);
  }
  [[nodiscard]] std::string be_path() const {
    return toolstack::backend_path(kDom0, fe_dom_, DevId{0});
  }
  [[nodiscard]] std::string tap_name() const {
    return "vif" + std::to_string(fe_dom_.value()) + ".0";
  }

  // --- the backend's xenstore loop (the daemon's BackendManager does this) ---
  void start_pump() {
    pump_stop_ = false;
    pump_ = std::thread([this] {
      while (!pump_stop_) {
        pollfd pfd{backend_xs_->watch_fd(), POLLIN, 0};
        (void)::poll(&pfd, 1, 20);
        while (auto ev = backend_xs_->read_watch())
          if (xenbus_->owns(*ev)) xenbus_->handle_watch(*ev);
      }
    });
  }
  void stop_pump() {
    pump_stop_ = true;
    if (pump_.joinable()) pump_.join();
  }

  // --- the host side: an AF_PACKET socket on the TAP ---
  void open_packet_socket(bool vnet_hdr = false) {
    sock_.reset(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
    ASSERT_TRUE(sock_.valid());
    if (vnet_hdr) {
      int one = 1;
      ASSERT_EQ(0, ::setsockopt(sock_.get(), SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one));
    }
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(::if_nametoindex(tap_name().c_str()));
    ASSERT_EQ(0, ::bind(sock_.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll));
  }
  /// The next frame the guest sent (not our own outgoing ones), or empty after `t`.
  std::vector<std::byte> host_receive(std::chrono::milliseconds t = 3s) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    std::vector<std::byte> buf(70000);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{sock_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      sockaddr_ll from{};
      socklen_t fl = sizeof from;
      const ssize_t n = ::recvfrom(sock_.get(), buf.data(), buf.size(), 0,
                                   reinterpret_cast<sockaddr*>(&from), &fl);
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
      buf.resize(static_cast<std::size_t>(n));
      return buf;
    }
    return {};
  }
  void host_send(const std::vector<std::byte>& frame) {
    ASSERT_EQ(::send(sock_.get(), frame.data(), frame.size(), 0),
              static_cast<ssize_t>(frame.size()));
  }
  /// Polls the guest until a packet arrives (or `t` passes).
  std::optional<netfront::RxPacket> guest_receive(std::chrono::milliseconds t = 3s) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    std::vector<netfront::RxPacket> got;
    while (std::chrono::steady_clock::now() < deadline) {
      netfront_->handle_event();
      if (netfront_->poll(got) > 0) return std::move(got.front());
      std::this_thread::sleep_for(1ms);
    }
    return std::nullopt;
  }
  /// Drains TX responses (the guest's side of completion).
  void guest_settle(std::chrono::milliseconds t = 300ms) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < deadline) {
      netfront_->handle_event();
      netfront_->process_tx_responses();
      std::this_thread::sleep_for(2ms);
    }
  }
  std::uint64_t counter(std::string_view name) {
    std::uint64_t sum = 0;
    for (const auto& q : vif_->report().queues)
      for (const auto& [k, v] : q.counters)
        if (k == name) sum += v;
    return sum;
  }

  static std::vector<std::byte> tcp_frame(std::size_t payload, std::uint8_t seed,
                                          net::L4ChecksumMode cs = net::L4ChecksumMode::full) {
    net::FrameSpec spec;
    spec.payload_len = payload;
    spec.payload_seed = seed;
    spec.checksum = cs;
    return net::build_frame(spec);
  }

  std::unique_ptr<test::XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> dom0_, domu_;
  DomId fe_dom_{};
  std::unique_ptr<hv::XenStore> toolstack_xs_, backend_xs_;
  std::unique_ptr<vif::EventLoopPool> loops_;
  std::unique_ptr<vif::Vif> vif_;
  std::unique_ptr<xenbus::BackendXenbus> xenbus_;
  std::unique_ptr<netfront::Netfront> netfront_;
  std::thread pump_;
  std::atomic<bool> pump_stop_{false};
  UniqueFd sock_;
};

TEST_F(BackendEndToEnd, HandshakeWaitsForHotplugBeforeConnected) {
  add_vif();
  // The TAP exists before InitWait, so the hotplug script can find it.
  EXPECT_NE(::if_nametoindex(tap_name().c_str()), 0u);
  EXPECT_EQ(*toolstack_xs_->read(be_path() + "/feature-rx-copy"), "1");
  EXPECT_EQ(*toolstack_xs_->read(be_path() + "/feature-sg"), "1");
  connect_guest();
  // Frontend connected, hotplug not run yet: the backend stays in InitWait.
  EXPECT_EQ(wait_state("4", 300ms), std::errc::timed_out);
  run_hotplug();
  EXPECT_FALSE(wait_state("4"));
  EXPECT_TRUE(vif_->report().connected);
}

class GuestToHost : public BackendEndToEnd, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(GuestToHost, FrameArrivesIntactOnTheTap) {
  bring_up(9000);
  const auto frame = tcp_frame(GetParam(), 7);
  ASSERT_TRUE(netfront_->send(frame).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), frame.size()));
  guest_settle();
  EXPECT_EQ(counter("tx_packets"), 1u);
  EXPECT_EQ(netfront_->stats().tx_error_responses, 0u);
}

// 60 and 1514 bytes (one slot), 9000 (three slots); payload sizes give these frame lengths.
INSTANTIATE_TEST_SUITE_P(Sizes, GuestToHost, ::testing::Values(6u, 1460u, 8946u));

TEST_F(BackendEndToEnd, GuestGsoSuperFrameReachesTheHostAsOnePacket) {
  bring_up();
  const auto frame = tcp_frame(64000, 3, net::L4ChecksumMode::partial);
  netfront::TxMeta meta;
  meta.csum_blank = true;
  meta.gso = netfront::RxGso{wire::GsoType::tcpv4, 1448};
  ASSERT_TRUE(netfront_->send(frame, meta).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  // Everything but the TCP checksum field (the kernel may fill it) is the guest's bytes.
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), 14 + 20 + 16));
  EXPECT_EQ(0, std::memcmp(got.data() + 54, frame.data() + 54, frame.size() - 54));
}

class HostToGuest : public BackendEndToEnd, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(HostToGuest, FrameUsesTheMinimalNumberOfSlots) {
  bring_up(9000);
  const auto frame = tcp_frame(GetParam(), 11);
  host_send(frame);
  auto pkt = guest_receive();
  ASSERT_TRUE(pkt.has_value());
  ASSERT_EQ(pkt->bytes.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(pkt->bytes.data(), frame.data(), frame.size()));
  EXPECT_EQ(pkt->slots_used, (frame.size() + 4095) / 4096);
  EXPECT_EQ(counter("rx_slots"), counter("rx_min_slots"));
}

INSTANTIATE_TEST_SUITE_P(Sizes, HostToGuest, ::testing::Values(6u, 1460u, 8946u));

TEST_F(BackendEndToEnd, HostGsoFrameArrivesAsOnePacketWithAGsoExtra) {
  bring_up();
  open_packet_socket(true);
  // 65226 bytes: the largest TSO frame the scenarios name.
  auto frame = tcp_frame(65226 - 54, 5, net::L4ChecksumMode::partial);
  virtio_net_hdr vh{};
  vh.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  vh.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
  vh.hdr_len = 54;
  vh.gso_size = 1448;
  vh.csum_start = 34;
  vh.csum_offset = 16;
  std::vector<std::byte> out(sizeof vh + frame.size());
  std::memcpy(out.data(), &vh, sizeof vh);
  std::memcpy(out.data() + sizeof vh, frame.data(), frame.size());
  host_send(out);
  auto pkt = guest_receive();
  ASSERT_TRUE(pkt.has_value());
  ASSERT_EQ(pkt->bytes.size(), frame.size());
  ASSERT_TRUE(pkt->gso.has_value());
  EXPECT_EQ(pkt->gso->type, wire::GsoType::tcpv4);
  EXPECT_EQ(pkt->gso->size, 1448);
  EXPECT_EQ(pkt->slots_used, 16u + 1u);  // ceil(65226/4096) = 16 data slots + the GSO extra
  EXPECT_TRUE(pkt->flags.has(wire::RxFlag::csum_blank));
  EXPECT_EQ(0, std::memcmp(pkt->bytes.data() + 54, frame.data() + 54, frame.size() - 54));
}

TEST_F(BackendEndToEnd, TinyFirstSlotsAreGatheredAndEighteenSlotsPass) {
  bring_up();
  const auto frame = tcp_frame(4000, 9);
  // XSA-423: the headers spread over a 20-byte first slot and tiny frags.
  std::vector<netfront::RawTxSlot> slots = {{0, 20}, {0, 10}, {0, 30}};
  std::size_t used = 60;
  while (used < frame.size()) {
    const std::uint16_t n =
        static_cast<std::uint16_t>(std::min<std::size_t>(512, frame.size() - used));
    slots.push_back({0, n});
    used += n;
  }
  ASSERT_LE(slots.size(), 18u);
  ASSERT_TRUE(netfront_->send_raw(slots, frame).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), frame.size()));
}

TEST_F(BackendEndToEnd, NineteenSlotsAreDroppedWithErrorResponsesAndTheVifStaysUp) {
  bring_up();
  const auto frame = tcp_frame(1800, 1);
  std::vector<netfront::RawTxSlot> slots(19, netfront::RawTxSlot{0, 100});
  slots.back().size = static_cast<std::uint16_t>(frame.size() - 18 * 100);
  ASSERT_TRUE(netfront_->send_raw(slots, frame).has_value());
  guest_settle();
  EXPECT_EQ(netfront_->stats().tx_error_responses, 19u);
  EXPECT_EQ(counter("tx_drop_too_many_slots"), 1u);
  EXPECT_FALSE(vif_->disabled());
  // The vif still carries traffic.
  const auto ok = tcp_frame(100, 2);
  ASSERT_TRUE(netfront_->send(ok).has_value());
  EXPECT_EQ(host_receive().size(), ok.size());
}

TEST_F(BackendEndToEnd, TwentySlotsDisableTheVif) {
  bring_up();
  const auto frame = tcp_frame(2000, 1);
  std::vector<netfront::RawTxSlot> slots(20, netfront::RawTxSlot{0, 100});
  slots.back().size = static_cast<std::uint16_t>(frame.size() - 19 * 100);
  ASSERT_TRUE(netfront_->send_raw(slots, frame).has_value());
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (!vif_->disabled() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(vif_->disabled());
  EXPECT_EQ(counter("tx_fatal"), 1u);
}

TEST_F(BackendEndToEnd, ZeroSizeSlotsAreAnsweredAndSkipped) {
  bring_up();
  const auto frame = tcp_frame(300, 4);
  std::vector<netfront::RawTxSlot> slots = {
      {0, 100}, {0, 0}, {0, static_cast<std::uint16_t>(frame.size() - 100)}};
  ASSERT_TRUE(netfront_->send_raw(slots, frame).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), frame.size()));
  guest_settle();
  EXPECT_EQ(netfront_->stats().tx_error_responses, 0u);
  EXPECT_EQ(counter("tx_zero_size_slots"), 1u);
}

TEST_F(BackendEndToEnd, FourQueuesEachCarryTraffic) {
  netfront::NetfrontOptions opts;
  opts.queues = 4;
  bring_up(1500, opts);
  ASSERT_EQ(netfront_->num_queues(), 4u);
  ASSERT_EQ(vif_->report().queues.size(), 4u);
  for (std::uint32_t q = 0; q < 4; ++q) {
    const auto frame = tcp_frame(500 + q, static_cast<std::uint8_t>(q));
    ASSERT_TRUE(netfront_->send(frame, {}, QueueId{q}).has_value());
    const auto got = host_receive();
    ASSERT_EQ(got.size(), frame.size()) << "queue " << q;
  }
  std::uint32_t queues_used = 0;
  for (const auto& q : vif_->report().queues)
    for (const auto& [k, v] : q.counters)
      if (k == "tx_packets" && v == 1) ++queues_used;
  EXPECT_EQ(queues_used, 4u);
}

TEST_F(BackendEndToEnd, RateLimitCapsGuestTransmit) {
  toolstack::VifSpec spec;
  spec.rate = "100000,100000";  // 100 kB every 100 ms
  add_vif(spec);
  run_hotplug();
  connect_guest();
  ASSERT_FALSE(wait_state("4"));
  open_packet_socket();
  const auto frame = tcp_frame(1400, 6);
  const auto start = std::chrono::steady_clock::now();
  std::size_t sent = 0;
  for (int i = 0; i < 600; ++i) {
    if (netfront_->send(frame).has_value()) ++sent;
    netfront_->process_tx_responses();
  }
  // Whatever the machine's load: within 250 ms at most the burst (128 KiB) plus three
  // refills may pass (an upper bound; the limiter never lets more through).
  std::size_t bytes = 0;
  while (std::chrono::steady_clock::now() - start < 250ms) {
    const auto got = host_receive(20ms);
    bytes += got.size();
  }
  EXPECT_GT(sent, 0u);
  EXPECT_LE(bytes, 128u * 1024 + 3 * 100000 + 1500);
  EXPECT_GT(counter("tx_rate_limited"), 0u);
}

TEST_F(BackendEndToEnd, RemovalClosesReleasesEverythingAndRemovesTheTap) {
  bring_up();
  ASSERT_TRUE(netfront_->send(tcp_frame(100, 1)).has_value());
  EXPECT_FALSE(host_receive().empty());
  ASSERT_FALSE(toolstack::remove_vif(*toolstack_xs_, kDom0, fe_dom_, DevId{0}));
  // libxl waited for state 6 and removed the dirs; the backend tore the vif down.
  EXPECT_EQ(::if_nametoindex(tap_name().c_str()), 0u);
  EXPECT_FALSE(vif_->report().connected);
  // The guest can revoke every grant: nothing is still mapped by the backend.
  netfront_->disconnect(1s);
  EXPECT_EQ(domu_->sim_grant_sharer().deferred_count(), 0u);
}

}  // namespace
}  // namespace unetback
