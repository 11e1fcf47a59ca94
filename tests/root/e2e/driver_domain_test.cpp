// A network driver domain on xensim (suite e2e, root; issue 18), the way Xen runs one with
// `driver_domain=1` and `xl devd`: unetbackd runs as the driver domain (--backend-domid N, its
// own xenstore connection, its grants checked against that domid), `unetback-xl devd` runs the
// hotplug scripts there, and a guest's `vif = ['backend=<driver domain>,...']` is served from
// it. The driver domain has a network namespace of its own with its bridge and address; the
// guest reaches that address, iperf3 runs both ways, destroying the guest releases everything
// in the driver domain, and destroying the driver domain under a running guest leaves the
// guest alive with its vif gone.
#include <gtest/gtest.h>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/hv/xen/xen_xenstore.hpp"
#include "tests/root/e2e/e2e_fixture.hpp"
#include "tests/support/xenbus_state.hpp"

namespace unetback::testing {
namespace {

using namespace std::chrono_literals;

class DriverDomain : public EndToEnd {
 protected:
  std::string tag() const override { return "ubdd"; }
  std::string subnet() const override { return "10.92.0"; }

  static constexpr const char* kDdBridge = "ddbr0";
  /// The driver domain's own address on its bridge (dom0's bridge, in another namespace,
  /// has subnet.1).
  std::string dd_ip() const { return subnet() + ".2"; }

  /// `unetback-xl create netdd --driver-domain`, its namespace with a bridge, and in it
  /// unetbackd as that domain and `unetback-xl devd`.
  void start_driver_domain() {
    const RunResult c = w().xl({"create", "netdd", "--driver-domain"});
    ASSERT_EQ(c.status, 0) << c.out << c.err;
    ASSERT_TRUE(c.out.starts_with("domid ")) << c.out;
    dd_ = std::atoi(c.out.c_str() + 6);
    ns_ = tag() + "n-" + std::to_string(::getpid());
    ASSERT_TRUE(w().add_namespace(ns_)) << w().why();
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {"ip", "link", "add", kDdBridge, "type", "bridge"},
             {"ip", "addr", "add", dd_ip() + "/24", "dev", kDdBridge},
             {"ip", "link", "set", kDdBridge, "up"}})
      ASSERT_EQ(w().in_ns(ns_, argv).status, 0);
    control_ = w().world() + "/unetbackd-netdd.sock";
    daemon_ = &w().spawn_in_ns(ns_,
                               {w().bins().unetbackd, "--hypervisor", "sim:" + w().world(),
                                "--backend-domid", std::to_string(dd_), "--control", control_},
                               "unetbackd-netdd.log");
    ASSERT_TRUE(
        daemon_->wait_for("serving /local/domain/" + std::to_string(dd_), testing::kHangGuard))
        << daemon_->log();
    devd_ = &w().spawn_in_ns(ns_, {w().bins().xl, "--world", w().world(), "devd", "netdd"},
                             "devd-netdd.log");
    ASSERT_TRUE(devd_->wait_for("serving the hotplug scripts", testing::kHangGuard))
        << devd_->log();
  }

  std::optional<XlWorld::Guest> create_client(int n) {
    return w().create_guest(n, {}, {}, kDdBridge, "", ",backend=netdd");
  }
  RunResult dd_ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {w().bins().ctl, "--control", control_};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run(argv, w().dir(), 60s);
  }
  std::string be_dir(const XlWorld::Guest& g) const {
    return "/local/domain/" + std::to_string(dd_) + "/backend/vif/" + std::to_string(g.domid);
  }

  int dd_ = -1;
  std::string ns_, control_;
  Daemon* daemon_ = nullptr;
  Daemon* devd_ = nullptr;
};

TEST_F(DriverDomain, AGuestIsServedFromTheDriverDomainAndReleasedThereWhenDestroyed) {
  ASSERT_NO_FATAL_FAILURE(start_driver_domain());
  const auto g = create_client(1);
  ASSERT_TRUE(g) << w().why() << "\n" << devd_->log() << daemon_->log();
  hv::LibXenStore xs(w().world() + "/dom0.sock");
  const std::string be = be_dir(*g) + "/0";
  EXPECT_EQ(test::read_state(xs, be + "/state"), test::XenbusState::connected);
  EXPECT_EQ(
      xs.read("/local/domain/" + std::to_string(g->domid) + "/device/vif/0/backend").value_or("?"),
      be);
  EXPECT_EQ(xs.read(be + "/hotplug-status").value_or("?"), "connected");
  // The TAP is the driver domain's, on its bridge; dom0 has none.
  EXPECT_TRUE(w().link_exists(ns_, g->tap()));
  EXPECT_FALSE(w().link_exists(w().ns0(), g->tap()));
  const RunResult link = w().in_ns(ns_, {"ip", "-o", "link", "show", "dev", g->tap()});
  EXPECT_NE(link.out.find(std::string("master ") + kDdBridge), std::string::npos) << link.out;
  EXPECT_NE(dd_ctl({"list"}).out.find(std::to_string(g->domid) + "/0"), std::string::npos);
  EXPECT_NE(devd_->log().find("online for " + be), std::string::npos) << devd_->log();

  // The guest reaches the driver domain, and iperf3 moves 64 MiB each way; the rates are
  // figures. What the receivers counted crossed the vif in packets of at most 64 KiB.
  EXPECT_TRUE(ping(g->ns, dd_ip())) << "the guest cannot ping the driver domain";
  Daemon& server =
      w().spawn_in_ns(ns_, {"iperf3", "-s", "--forceflush", "-p", "5202"}, "iperf3-netdd.log");
  ASSERT_TRUE(server.wait_for("Server listening", testing::kHangGuard)) << server.log();
  double received[2] = {0, 0};
  for (const bool reverse : {false, true}) {
    std::vector<std::string> argv = {"iperf3", "-c", dd_ip(), "-p", "5202", "-n", "64M", "-J"};
    if (reverse) argv.push_back("-R");
    const RunResult r = w().in_ns(g->ns, argv, 600s);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    received[reverse ? 1 : 0] = testing::expect_transfer(r.out, 64.0 * 1024 * 1024);
    test::report_figure(reverse ? "driver_domain_to_guest_bps" : "driver_domain_from_guest_bps",
                        testing::iperf_bits_per_second(r.out), "bit/s");
  }

  // Carried by the driver domain's unetbackd (dom0's served nothing).
  const std::string st = dd_ctl({"--json", "stats"}).out;
  EXPECT_GE(testing::sum_counter(st, "tx_packets"), static_cast<std::uint64_t>(received[0] / 65536))
      << st;
  EXPECT_GE(testing::sum_counter(st, "rx_packets"), static_cast<std::uint64_t>(received[1] / 65536))
      << st;
  EXPECT_GT(testing::sum_counter(st, "tx_packets"), 0u) << st;
  EXPECT_GT(testing::sum_counter(st, "rx_packets"), 0u) << st;
  EXPECT_TRUE(reply_vifs(list()).empty()) << list();

  // xl destroy of the guest: the driver domain's devd runs the script offline and removes the
  // backend dir; unetbackd there lets go of the vif and its TAP.
  const RunResult d = w().destroy_guest(*g);
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_FALSE(xs.read(be + "/state").has_value()) << "the backend dir outlived the guest";
  EXPECT_FALSE(xs.directory(be_dir(*g)).has_value()) << "an empty frontend-id dir is left";
  EXPECT_NE(devd_->log().find("offline for " + be), std::string::npos) << devd_->log();
  bool released = false;
  const auto deadline = std::chrono::steady_clock::now() + testing::kHangGuard;
  while (!released && std::chrono::steady_clock::now() < deadline) {
    released = !w().link_exists(ns_, g->tap()) &&
               dd_ctl({"list"}).out.find(std::to_string(g->domid) + "/0") == std::string::npos;
    if (!released) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(released) << "the driver domain still holds the guest's vif: "
                        << dd_ctl({"list"}).out;
  EXPECT_FALSE(daemon_->wait_exit(0ms).has_value()) << daemon_->log();
}

TEST_F(DriverDomain, DestroyingTheDriverDomainLeavesTheGuestAliveWithItsVifGone) {
  ASSERT_NO_FATAL_FAILURE(start_driver_domain());
  const auto g = create_client(2);
  ASSERT_TRUE(g) << w().why() << "\n" << devd_->log() << daemon_->log();
  EXPECT_TRUE(ping(g->ns, dd_ip()));
  const pid_t shim = w().guest_pid(*g);
  ASSERT_GT(shim, 0);

  // A backend outside dom0 runs only in a driver domain: the guest's own domain is refused.
  const RunResult refused =
      w().in_ns(ns_, {w().bins().unetbackd, "--hypervisor", "sim:" + w().world(), "--backend-domid",
                      std::to_string(g->domid), "--control", w().world() + "/refused.sock"});
  EXPECT_EQ(refused.status, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("driver domain"), std::string::npos) << refused.err;

  const RunResult d = w().xl({"destroy", "netdd"});
  EXPECT_EQ(d.status, 0) << d.err;
  // Everything that ran in it dies with it: unetbackd (killed) and devd (its connection).
  EXPECT_TRUE(daemon_->wait_exit(testing::kHangGuard).has_value())
      << "unetbackd outlived its driver domain";
  EXPECT_TRUE(devd_->wait_exit(testing::kHangGuard).has_value())
      << "devd outlived its driver domain";
  hv::LibXenStore xs(w().world() + "/dom0.sock");
  EXPECT_FALSE(xs.read(be_dir(*g) + "/0/state").has_value());

  // The guest lives on (its process answers, its namespace and TAP are its own), without a
  // network: nothing serves its vif. It saw its backend go (and disconnected) before it is
  // looked at.
  const std::string guest_log = w().world() + "/guest-" + std::to_string(g->domid) + ".log";
  const auto deadline = std::chrono::steady_clock::now() + testing::kHangGuard;
  while (testing::slurp(guest_log).find("disconnecting") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_NE(testing::slurp(guest_log).find("disconnecting"), std::string::npos)
      << testing::slurp(guest_log);
  EXPECT_TRUE(testing::running(shim)) << "the guest died with its driver domain";
  EXPECT_TRUE(unanswered(g->ns, dd_ip()));
  // And it can still be destroyed without waiting out a timeout: its vif's backend is gone,
  // nothing to wait for (unetback-xl says when it gave up waiting for Closed or for the
  // driver domain's cleanup). How long it took is a figure.
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult gd = w().destroy_guest(*g);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(gd.status, 0) << gd.err;
  EXPECT_EQ(gd.err.find("did not reach Closed"), std::string::npos) << gd.err;
  EXPECT_EQ(gd.err.find("did not remove it within"), std::string::npos) << gd.err;
  test::report_figure("driver_domain_destroy_guest_after_driver_domain_ms",
                      std::chrono::duration<double, std::milli>(took).count(), "ms");
  const auto gone_by = std::chrono::steady_clock::now() + testing::kHangGuard;
  while (testing::running(shim) && std::chrono::steady_clock::now() < gone_by)
    std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(testing::running(shim)) << "the guest outlived xl destroy";
  EXPECT_FALSE(xs.read("/local/domain/" + std::to_string(g->domid) + "/device/vif/0").has_value());
}

}  // namespace
}  // namespace unetback::testing
