// The backend end to end, in one process over a real xensim: libxl's vif nodes (tools/xl),
// the backend's xenbus state machine driving a real Vif (rings, grant copies, event
// channels, a multi-queue TAP), and the userspace Netfront as the guest. The host side of
// each guest is its TAP `vif<domid>.0` in a private network namespace, read and written
// through a PacketSocket (tests/support/packet_socket.hpp). Needs root (TAP, namespace): suite
// root-netns.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstring>
#include <gtest/gtest.h>
#include <mutex>
#include <net/if.h>
#include <poll.h>
#include <thread>
#include <unistd.h>

#include "backend/vif/switch_registry.hpp"
#include "backend/vif/vif.hpp"
#include "backend/xenbus/xenbus_adapter.hpp"
#include "common/hv/sim/sim_grant_sharer.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/net/frame_builder.hpp"
#include "common/net/linux_virtio_net.hpp"
#include "frontend-shim/netfront.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/private_netns.hpp"
#include "tests/support/sim_guest.hpp"
#include "tests/support/wait.hpp"
#include "tests/support/watch_pump.hpp"
#include "tests/support/xenbus_state.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::test {

using namespace std::chrono_literals;

/// One guest (tests/support/sim_guest.hpp) with its vif on the backend.
struct Guest : SimGuest {
  std::unique_ptr<vif::Vif> vif;
  std::unique_ptr<xenbus::BackendXenbus> xenbus;
};

class BackendEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!enter_private_netns()) GTEST_SKIP() << "needs root and /dev/net/tun (suite root-netns)";
    world_ = std::make_unique<XensimProcess>();
    dom0_ = test::open_backend_dom0(world_->dir());
    toolstack_xs_ = dom0_->open_xenstore();
    backend_xs_ = dom0_->open_xenstore();
    loops_ = std::make_unique<event::EventLoopPool>(2);
    new_guest();
    start_pump();
  }

  void TearDown() override {
    for (auto& g : guests_) {
      if (g->netfront) g->netfront->disconnect(kHangGuard);
      g->netfront.reset();
      if (toolstack_xs_ && g->vif)
        (void)toolstack::remove_vif(*toolstack_xs_, kDom0, g->dom, DevId{0});
    }
    stop_pump();
    for (auto& g : guests_) {
      g->xenbus.reset();
      g->vif.reset();
    }
    switches_.reset();
    loops_.reset();
    backend_xs_.reset();
    toolstack_xs_.reset();
    guests_.clear();
    dom0_.reset();
    world_.reset();
  }

  /// A new domU (a frontend-role hypervisor handle in this process).
  Guest& new_guest() {
    auto g = std::make_unique<Guest>();
    g->open_domain(world_->dir(), "guest" + std::to_string(guests_.size()));
    const std::lock_guard lock(mu_);
    guests_.push_back(std::move(g));
    return *guests_.back();
  }
  Guest& guest(std::size_t i = 0) { return *guests_.at(i); }

  /// The toolstack adds the vif; the backend probes it (TAP, features, InitWait).
  void add_vif(Guest& g, toolstack::VifSpec spec = {}, vif::Tunables tunables = {}) {
    ASSERT_FALSE(toolstack::add_vif(*toolstack_xs_, kDom0, g.dom, spec));
    {
      const std::lock_guard lock(mu_);
      g.vif = std::make_unique<vif::Vif>(*dom0_, *loops_, g.dom, spec.devid, tunables, nullptr,
                                         switches_.get());
      g.xenbus = std::make_unique<xenbus::BackendXenbus>(
          *backend_xs_, kDom0, g.dom, spec.devid, *g.vif,
          xenbus::FeatureOptions{tunables.max_queues, true, ctrl_ring_});
      ASSERT_FALSE(g.xenbus->start());
    }
    ASSERT_FALSE(wait_state(g, XenbusState::init_wait)) << "the backend never reached InitWait";
  }
  void add_vif(toolstack::VifSpec spec = {}, vif::Tunables tunables = {}) {
    add_vif(guest(), std::move(spec), tunables);
  }

  /// What vif-bridge does: the TAP up, then hotplug-status=connected.
  void run_hotplug(Guest& g, std::uint32_t mtu = 1500) {
    ASSERT_NE(::if_nametoindex(g.tap_name().c_str()), 0u) << "no TAP before InitWait";
    ASSERT_EQ(0,
              std::system(
                  ("ip link set " + g.tap_name() + " mtu " + std::to_string(mtu) + " up").c_str()));
    ASSERT_FALSE(toolstack_xs_->write(g.be_path() + "/hotplug-status", "connected"));
  }
  void run_hotplug(std::uint32_t mtu = 1500) { run_hotplug(guest(), mtu); }

  void connect_guest(Guest& g, netfront::NetfrontOptions opts = {}) {
    ASSERT_FALSE(g.connect(opts, kHangGuard));
  }
  void connect_guest(netfront::NetfrontOptions opts = {}) { connect_guest(guest(), opts); }

  void bring_up(Guest& g, std::uint32_t mtu = 1500, netfront::NetfrontOptions opts = {},
                vif::Tunables tunables = {}) {
    add_vif(g, {}, tunables);
    run_hotplug(g, mtu);
    connect_guest(g, opts);
    ASSERT_FALSE(wait_state(g, XenbusState::connected));
    open_packet_socket(g);
  }
  void bring_up(std::uint32_t mtu = 1500, netfront::NetfrontOptions opts = {},
                vif::Tunables tunables = {}) {
    bring_up(guest(), mtu, opts, tunables);
  }

  std::error_code wait_state(Guest& g, XenbusState s, std::chrono::milliseconds t = kHangGuard) {
    return wait_for_state(*toolstack_xs_, g.be_path() + "/state", s, t);
  }
  std::error_code wait_state(XenbusState s, std::chrono::milliseconds t = kHangGuard) {
    return wait_state(guest(), s, t);
  }
  [[nodiscard]] std::string be_path() { return guest().be_path(); }
  [[nodiscard]] std::string tap_name() { return guest().tap_name(); }

  // --- the backend's xenstore loop (the daemon's BackendManager does this) ---
  void start_pump() {
    pump_ = std::make_unique<WatchPump>(*backend_xs_, [this](const hv::XsWatchEvent& ev) {
      const std::lock_guard lock(mu_);
      for (auto& g : guests_)
        if (g->xenbus && g->xenbus->owns(ev)) g->xenbus->handle_watch(ev);
    });
  }
  void stop_pump() { pump_.reset(); }

  // --- the host side: a packet socket on the guest's TAP ---
  static void open_packet_socket(Guest& g, bool vnet_hdr = false) {
    ASSERT_TRUE(g.open_packet_socket(vnet_hdr)) << std::strerror(errno);
  }
  void open_packet_socket(bool vnet_hdr = false) { open_packet_socket(guest(), vnet_hdr); }

  /// The next frame the guest sent (not our own outgoing ones), or empty after `t`.
  static std::vector<std::byte> host_receive(Guest& g, std::chrono::milliseconds t = kHangGuard) {
    return g.sock.receive(t).value_or(std::vector<std::byte>{});
  }
  std::vector<std::byte> host_receive(std::chrono::milliseconds t = kHangGuard) {
    return host_receive(guest(), t);
  }
  static void host_send(Guest& g, const std::vector<std::byte>& frame) {
    ASSERT_TRUE(g.sock.send(frame)) << std::strerror(errno);
  }
  void host_send(const std::vector<std::byte>& frame) { host_send(guest(), frame); }

  /// Polls the guest until a packet arrives (or `t` passes).
  static std::optional<netfront::RxPacket> guest_receive(Guest& g,
                                                         std::chrono::milliseconds t = kHangGuard) {
    return g.receive(t);
  }
  std::optional<netfront::RxPacket> guest_receive(std::chrono::milliseconds t = kHangGuard) {
    return guest_receive(guest(), t);
  }
  /// Takes TX responses (the guest's side of completion) until `done()` holds; false if it
  /// never did within the hang guard.
  template <typename Pred>
  static bool guest_settle(Guest& g, Pred done, std::chrono::milliseconds t = kHangGuard) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    for (;;) {
      g.netfront->handle_event();
      g.netfront->process_tx_responses();
      if (done()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
  }
  template <typename Pred>
  bool guest_settle(Pred done, std::chrono::milliseconds t = kHangGuard) {
    return guest_settle(guest(), done, t);
  }
  /// Takes TX responses until every packet the guest sent was answered (each slot of it).
  static bool guest_settle_all(Guest& g) {
    return guest_settle(g, [&] {
      const auto st = g.netfront->stats();
      return st.tx_completed == st.tx_packets;
    });
  }
  bool guest_settle_all() { return guest_settle_all(guest()); }

  template <typename Pred>
  static bool wait_for(Pred pred, std::chrono::milliseconds t = kHangGuard) {
    return wait_until(pred, t);
  }

  static std::uint64_t counter(Guest& g, std::string_view name) {
    std::uint64_t sum = 0;
    for (const auto& q : g.vif->report().queues)
      for (const auto& [k, v] : q.counters)
        if (k == name) sum += v;
    return sum;
  }
  std::uint64_t counter(std::string_view name) { return counter(guest(), name); }

  static std::vector<std::byte> tcp_frame(std::size_t payload, std::uint8_t seed,
                                          net::L4ChecksumMode cs = net::L4ChecksumMode::full) {
    net::FrameSpec spec;
    spec.payload_len = payload;
    spec.payload_seed = seed;
    spec.checksum = cs;
    return net::build_frame(spec);
  }

  /// Whether the backend advertises feature-ctrl-ring (unetbackd does).
  bool ctrl_ring_ = false;
  /// The internal switches a vif with B:bridge=unetback:<name> joins (none: such a vif fails).
  std::unique_ptr<vif::SwitchRegistry> switches_;
  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> dom0_;
  std::unique_ptr<hv::XenStore> toolstack_xs_, backend_xs_;
  std::unique_ptr<event::EventLoopPool> loops_;
  std::mutex mu_;  // guests_ and their xenbus objects, against the pump thread
  std::vector<std::unique_ptr<Guest>> guests_;
  std::unique_ptr<WatchPump> pump_;
};

}  // namespace unetback::test
