// netfront-shim end to end: a real xensim world, the backend (xenbus + Vif) in this process
// in a private network namespace, and the real `netfront-shim` binary as the guest, its TAP
// in a namespace of its own (`ip netns add`). Real traffic crosses the rings: ping and iperf3
// (both directions) between the host side (the vif TAP, 10.77.0.1) and the guest
// (10.77.0.2). Rates and round-trip times are printed as figures, never judged; every wait is
// for a condition (an output line, a xenstore value, a reply), with a 30 s guard against a
// hang. Needs root: suite root-netns.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <regex>
#include <sched.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "backend/vif/vif.hpp"
#include "backend/xenbus/xenbus_adapter.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/figure.hpp"
#include "tests/support/private_netns.hpp"
#include "tests/support/sim_guest.hpp"
#include "tests/support/spawn.hpp"
#include "tests/support/watch_pump.hpp"
#include "tests/support/xenbus_state.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback {
namespace {

using test::XenbusState;

using namespace std::chrono_literals;

/// How long a wait for a condition may take before the test calls it a hang.
constexpr std::chrono::seconds kHangGuard{30};

std::string shim_binary() {
  if (const char* p = std::getenv("NETFRONT_SHIM_BIN")) return p;
  return NETFRONT_SHIM_BIN_DEFAULT;
}

/// Options for a child whose stdout and stderr both go to one pipe the test reads.
test::SpawnOptions piped() {
  test::SpawnOptions o;
  o.out = test::Output::pipe();
  o.err_to_out = true;
  return o;
}

/// Runs a command to completion (bounded), returning {exit code or -1, output}.
std::pair<int, std::string> run(const std::vector<std::string>& argv,
                                std::chrono::milliseconds t = 60s) {
  test::Process s(argv, piped());
  const auto st = s.wait(t);
  if (!st || !WIFEXITED(*st)) return {-1, s.output()};
  return {WEXITSTATUS(*st), s.output()};
}

/// end.<section>.bits_per_second from `iperf3 -J` output (0 if absent).
double iperf_bits_per_second(const std::string& json, const std::string& section) {
  const auto end = json.find("\"end\"");
  if (end == std::string::npos) return 0;
  const auto sec = json.find("\"" + section + "\"", end);
  if (sec == std::string::npos) return 0;
  const auto key = json.find("\"bits_per_second\"", sec);
  if (key == std::string::npos) return 0;
  const auto colon = json.find(':', key);
  return std::strtod(json.c_str() + colon + 1, nullptr);
}

class ShimEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::enter_private_netns())
      GTEST_SKIP() << "needs root and /dev/net/tun (suite root-netns)";
    if (::access("/usr/bin/iperf3", X_OK) != 0 || ::access("/usr/sbin/ip", X_OK) != 0)
      GTEST_SKIP() << "needs ip and iperf3";
    netns_ = "unetback-shim-" + std::to_string(::getpid());
    ASSERT_EQ(run({"/usr/sbin/ip", "netns", "add", netns_}).first, 0);
    netns_created_ = true;
    ASSERT_EQ(
        run({"/usr/sbin/ip", "netns", "exec", netns_, "/usr/sbin/ip", "link", "set", "lo", "up"})
            .first,
        0);

    world_ = std::make_unique<test::XensimProcess>();
    dom0_ = test::open_backend_dom0(world_->dir());
    auto dom = dom0_->create_domain("guest");
    ASSERT_TRUE(dom.has_value()) << dom.error().message();
    fe_dom_ = *dom;
    toolstack_xs_ = dom0_->open_xenstore();
    backend_xs_ = dom0_->open_xenstore();
    loops_ = std::make_unique<event::EventLoopPool>(2);

    // The toolstack adds the vif; the backend probes it (TAP, features, InitWait).
    toolstack::VifSpec spec;
    ASSERT_FALSE(toolstack::add_vif(*toolstack_xs_, kDom0, fe_dom_, spec));
    vif_ =
        std::make_unique<vif::Vif>(*dom0_, *loops_, fe_dom_, spec.devid, vif::Tunables{}, nullptr);
    xenbus_ = std::make_unique<xenbus::BackendXenbus>(
        *backend_xs_, kDom0, fe_dom_, spec.devid, *vif_,
        xenbus::FeatureOptions{vif::Tunables{}.max_queues, true, ctrl_ring_});
    ASSERT_FALSE(xenbus_->start());
    start_pump();
    ASSERT_FALSE(wait_state(XenbusState::init_wait)) << "the backend never reached InitWait";
    // What vif-bridge would do, with an address instead of a bridge: the host side.
    ASSERT_EQ(run({"/usr/sbin/ip", "link", "set", tap_name(), "up"}).first, 0);
    ASSERT_EQ(run({"/usr/sbin/ip", "addr", "add", "10.77.0.1/24", "dev", tap_name()}).first, 0);
    ASSERT_FALSE(toolstack_xs_->write(be_path() + "/hotplug-status", "connected"));
  }

  void TearDown() override {
    if (shim_ && !shim_->exited()) {
      shim_->signal(SIGTERM);
      (void)shim_->wait(5s);
    }
    if (shim_) std::cout << "--- netfront-shim output ---\n" << shim_->output() << "---\n";
    shim_.reset();
    if (toolstack_xs_ && vif_)
      (void)toolstack::remove_vif(*toolstack_xs_, kDom0, fe_dom_, DevId{0});
    stop_pump();
    xenbus_.reset();
    vif_.reset();
    loops_.reset();
    backend_xs_.reset();
    toolstack_xs_.reset();
    dom0_.reset();
    world_.reset();
    if (netns_created_) (void)run({"/usr/sbin/ip", "netns", "delete", netns_});
  }

  void start_shim(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {shim_binary(),
                                     "--hypervisor",
                                     world_->spec(),
                                     "--domid",
                                     std::to_string(fe_dom_.value()),
                                     "--netns",
                                     netns_,
                                     "--address",
                                     "10.77.0.2/24",
                                     "--connect-timeout-ms",
                                     "10000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    shim_ = std::make_unique<test::Process>(argv, piped());
    ASSERT_TRUE(shim_->wait_for_output("netfront-shim ready", kHangGuard)) << shim_->output();
    ASSERT_FALSE(wait_state(XenbusState::connected));
  }

  std::error_code wait_state(XenbusState s, std::chrono::milliseconds t = kHangGuard) {
    return test::wait_for_state(*toolstack_xs_, be_path() + "/state", s, t);
  }
  std::error_code wait_fe_state(XenbusState s, std::chrono::milliseconds t = kHangGuard) {
    return test::wait_for_state(*toolstack_xs_,
                                toolstack::frontend_path(fe_dom_, DevId{0}) + "/state", s, t);
  }
  [[nodiscard]] std::string be_path() const {
    return toolstack::backend_path(kDom0, fe_dom_, DevId{0});
  }
  [[nodiscard]] std::string tap_name() const {
    return "vif" + std::to_string(fe_dom_.value()) + ".0";
  }

  void start_pump() {
    pump_ = std::make_unique<test::WatchPump>(*backend_xs_, [this](const hv::XsWatchEvent& ev) {
      if (xenbus_->owns(ev)) xenbus_->handle_watch(ev);
    });
  }
  void stop_pump() { pump_.reset(); }

  /// 0 only if every request got its reply (with -c and -w, ping sends until it has `count`
  /// replies; fewer by the 30 s deadline is exit code 1).
  int ping(int count = 3) {
    return run({"/usr/bin/ping", "-c", std::to_string(count), "-w", "30", "-i", "0.2", "10.77.0.2"})
        .first;
  }

  std::unique_ptr<test::XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> dom0_;
  DomId fe_dom_{};
  std::unique_ptr<hv::XenStore> toolstack_xs_, backend_xs_;
  std::unique_ptr<event::EventLoopPool> loops_;
  std::unique_ptr<vif::Vif> vif_;
  std::unique_ptr<xenbus::BackendXenbus> xenbus_;
  std::unique_ptr<test::WatchPump> pump_;
  std::string netns_;
  bool netns_created_ = false;
  std::unique_ptr<test::Process> shim_;
  bool ctrl_ring_ = false;  ///< the backend offers feature-ctrl-ring
};

TEST_F(ShimEndToEnd, ShimConnectsAndTheHostPingsTheGuest) {
  start_shim();
  EXPECT_NE(shim_->output().find("tap=eth0 queues="), std::string::npos);
  // The guest's TAP carries the vif's MAC from xenstore and the address we asked for.
  const auto [rc, link] =
      run({"/usr/sbin/ip", "netns", "exec", netns_, "/usr/sbin/ip", "addr", "show", "dev", "eth0"});
  ASSERT_EQ(rc, 0) << link;
  EXPECT_NE(link.find("00:16:3e:00:00:01"), std::string::npos) << link;
  EXPECT_NE(link.find("10.77.0.2/24"), std::string::npos) << link;
  EXPECT_EQ(ping(3), 0);
}

/// The backend offers a control ring (its vif layer serves it).
class ShimWithCtrlRing : public ShimEndToEnd {
 protected:
  void SetUp() override {
    ctrl_ring_ = true;
    ShimEndToEnd::SetUp();
  }
  std::uint64_t vif_counter(std::string_view name) {
    std::uint64_t sum = 0;
    for (const auto& q : vif_->report().queues) {
      for (const auto& [k, v] : q.counters)
        if (k == name) sum += v;
    }
    return sum;
  }
};

// --rss: the control-ring sequence runs in the shim's loop (nothing there waits for the
// backend), and the ready line follows its end, so whoever waits for "ready" finds the hash
// configured: the backend has answered all five requests, and the guest is pingable.
TEST_F(ShimWithCtrlRing, RssSequenceIsAnsweredBeforeTheReadyLine) {
  start_shim({"--rss"});
  EXPECT_EQ(vif_counter("ctrl_requests"), 5U) << shim_->output();
  const auto& out = shim_->output();
  const auto rss = out.find("RSS on: Toeplitz, 128-entry mapping, 5 control requests");
  ASSERT_NE(rss, std::string::npos) << out;
  EXPECT_LT(rss, out.find("netfront-shim ready")) << out;
  EXPECT_EQ(vif_counter("ctrl_failed"), 0U);
  EXPECT_EQ(ping(3), 0);
}

// One iperf3 server per direction (-1: it serves one test and exits), each started once the
// last one has exited: a client that reached a server still tearing the previous test down was
// reset before its first byte (1 of 20 runs beside two busy loops).
TEST_F(ShimEndToEnd, Iperf3CarriesTrafficBothWays) {
  start_shim();
  ASSERT_EQ(ping(1), 0);
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  for (const bool reverse : {false, true}) {
    test::Process server({"/usr/sbin/ip", "netns", "exec", netns_, "/usr/bin/iperf3", "-s", "-1",
                          "--forceflush", "-p", port},
                         piped());
    ASSERT_TRUE(server.wait_for_output("Server listening", kHangGuard)) << server.output();
    std::vector<std::string> argv = {
        "/usr/bin/iperf3", "-c", "10.77.0.2", "-p", port, "-t", "2", "-J"};
    if (reverse) argv.push_back("-R");
    const auto [rc, json] = run(argv, 2s + 2 * kHangGuard);
    ASSERT_EQ(rc, 0) << json;
    EXPECT_EQ(json.find("\"error\""), std::string::npos) << json;
    const double bps = iperf_bits_per_second(json, "sum_received");
    test::report_figure(reverse ? "shim_guest_to_host_bps" : "shim_host_to_guest_bps", bps,
                        "bit/s");
    EXPECT_GT(bps, 0.0) << json;
    EXPECT_TRUE(server.wait(kHangGuard).has_value()) << "the one-off server did not end\n"
                                                     << server.output();
  }
}

TEST_F(ShimEndToEnd, SigtermClosesTheFrontendCleanlyAndTheBackendFollows) {
  start_shim();
  ASSERT_EQ(::kill(shim_->pid(), SIGTERM), 0) << "netfront-shim is gone already";
  const auto st = shim_->wait(kHangGuard);
  ASSERT_TRUE(st.has_value());
  ASSERT_TRUE(WIFEXITED(*st));
  EXPECT_EQ(WEXITSTATUS(*st), 0);
  EXPECT_FALSE(wait_fe_state(XenbusState::closed));
  // The backend saw the frontend close: Closing then Closed (it keeps the TAP: online=1).
  EXPECT_FALSE(wait_state(XenbusState::closed));
  EXPECT_FALSE(vif_->report().connected);
}

TEST_F(ShimEndToEnd, ShimReconnectsAfterTheBackendClosesAndComesBack) {
  start_shim();
  ASSERT_EQ(ping(1), 0);
  // The backend goes away (Closing, as a toolstack forcing it would), then offers InitWait
  // again when the frontend starts over. Its Closed in between is not waited for: the shim
  // starts over at once, and InitWait and Connected overwrite Closed within milliseconds
  // (16 ms from Closing to "reconnected" in one CI run, where the test's reader missed it).
  ASSERT_FALSE(
      toolstack_xs_->write(be_path() + "/state", xenbus::to_xs_string(XenbusState::closing)));
  EXPECT_TRUE(shim_->wait_for_output("reconnected", kHangGuard)) << shim_->output();
  EXPECT_FALSE(wait_state(XenbusState::connected)) << shim_->output();
  const auto& out = shim_->output();
  const auto closing = out.find("backend state Closing: disconnecting");
  ASSERT_NE(closing, std::string::npos) << out;
  EXPECT_LT(closing, out.find("reconnected (1 queues)")) << out;
  EXPECT_TRUE(vif_->report().connected);
  EXPECT_EQ(ping(3), 0);
}

TEST_F(ShimEndToEnd, SlowGuestTakesPacketsAtItsRateSoTheBackendQueues) {
  start_shim({"--rx-rate", "20"});
  // Ten echo requests 10 ms apart to a guest taking 20 packets/s off its RX ring (a bucket of
  // one packet, refilled every 50 ms): every request gets its reply, and the guest cannot take
  // the ten in less than 9 x 50 ms, so the last reply comes at least 450 ms after the first
  // request left (a slower machine only makes that longer). The rtts are figures.
  const auto [rc, out] =
      run({"/usr/bin/ping", "-D", "-c", "10", "-i", "0.01", "-w", "30", "10.77.0.2"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(" 10 received"), std::string::npos) << out;
  // ping -D: "[<epoch s>] 64 bytes from ...: icmp_seq=N ttl=64 time=<ms> ms" per reply.
  // The first request sent is the earliest reply time less its rtt.
  const std::regex reply(R"(\[([0-9.]+)\][^\n]*icmp_seq=[0-9]+[^\n]*time=([0-9.]+) ms)");
  double first_sent = 1e18, last_reply = -1;
  int replies = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), reply); it != std::sregex_iterator();
       ++it, ++replies) {
    const double at = std::stod((*it)[1].str());
    first_sent = std::min(first_sent, at - std::stod((*it)[2].str()) / 1000);
    last_reply = std::max(last_reply, at);
  }
  ASSERT_EQ(replies, 10) << out;
  // 440 ms: 450 less the rounding of ping's printed times.
  EXPECT_GE((last_reply - first_sent) * 1000, 440) << "the guest took packets faster than 20/s\n"
                                                   << out;
  const auto at = out.find("rtt min/avg/max/mdev = ");
  ASSERT_NE(at, std::string::npos) << out;
  double mn = 0, avg = 0, mx = 0;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "rtt min/avg/max/mdev = %lf/%lf/%lf", &mn, &avg, &mx), 3);
  test::report_figure("shim_slow_guest_rtt_min_ms", mn, "ms");
  test::report_figure("shim_slow_guest_rtt_max_ms", mx, "ms");
}

TEST(ShimCommandLine, UsageErrorsExitTwoAndHelpExitsZero) {
  EXPECT_EQ(run({shim_binary(), "--help"}).first, 0);
  EXPECT_EQ(run({shim_binary()}).first, 2);
  EXPECT_EQ(run({shim_binary(), "--hypervisor", "sim:/x", "--bogus"}).first, 2);
  EXPECT_EQ(run({shim_binary(), "--hypervisor", "sim:/x", "--address", "10.0.0.2"}).first, 2);
  EXPECT_EQ(run({shim_binary(), "--hypervisor", "sim:/x", "--no-sg", "--mtu", "9000"}).first, 2);
  // No xensim there: a setup failure.
  EXPECT_EQ(run({shim_binary(), "--hypervisor", "sim:/nonexistent-unetback-world"}).first, 1);
}

}  // namespace
}  // namespace unetback
