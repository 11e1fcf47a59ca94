// The e2e suite's fixture: a world (xensim, unetbackd in a dom0 namespace with a Linux bridge,
// unetback-xl) per test, and what the scenarios do in it: iperf3 and ping from guests'
// namespaces, the daemon's counters and vif list through unetback-ctl.
//
// The scenarios assert behaviour only: bytes that arrive, counters that add up, traffic that
// goes on, everything released. Rates, shares and outages are printed as figures
// (report_figure), never judged. Every wait is for an observable condition (a log line, a
// counter, a socket) with a deadline of 30 s or more that only guards against a hang.
#pragma once

#include <gtest/gtest.h>
#include <map>
#include <utility>

#include "tests/support/ctl_json.hpp"
#include "tests/support/figure.hpp"
#include "tests/support/xl_world.hpp"

namespace unetback::testing {

using namespace std::chrono_literals;

inline XlWorld::Binaries binaries() {
  return {env_or("XENSIM_BIN", XENSIM_BIN_DEFAULT),
          env_or("UNETBACKD_BIN", UNETBACKD_BIN_DEFAULT),
          env_or("UNETBACK_XL_BIN", UNETBACK_XL_BIN_DEFAULT),
          env_or("UNETBACK_CTL_BIN", UNETBACK_CTL_BIN_DEFAULT),
          env_or("NETFRONT_SHIM_BIN", NETFRONT_SHIM_BIN_DEFAULT),
          env_or("VIF_UNETBACK_SCRIPT", VIF_UNETBACK_SCRIPT_DEFAULT)};
}

// The daemon's replies (`unetback-ctl --json`), read as JSON: sum_counter(json, name) sums every
// member `name` (the per-queue counters), reply_vif() and reply_vif_fields() find vifs.
using test::queue_counters;
using test::reply_has_vif_with;
using test::reply_vif;
using test::reply_vif_fields;
using test::reply_vifs;
using test::sum_counter;

/// How long a wait for a condition may take before the test calls it a hang.
inline constexpr std::chrono::seconds kHangGuard{30};

/// The lowest of `rates` (0 when empty): a stream's slowest interval, for a figure.
inline double lowest(const std::vector<double>& rates) {
  return rates.empty() ? 0 : *std::min_element(rates.begin(), rates.end());
}

/// What an `iperf3 -n <bytes> -J` run (output `json`) must show: its sender wrote every byte
/// and its receiver counted some. (iperf3's receiver stops counting when the sender says the
/// test is over, before the last bytes in flight arrive; TCP still delivers them, or iperf3
/// fails.) The bytes the receiver counted: what crossed the vif for sure, for the counters
/// that must cover them.
inline double expect_transfer(const std::string& json, double bytes) {
  EXPECT_GE(iperf_bytes_sent(json), bytes) << json;
  const double received = iperf_bytes_received(json);
  EXPECT_GT(received, 0) << json;
  return received;
}

class EndToEnd : public ::testing::Test {
 protected:
  /// What a derived fixture's world differs in.
  virtual std::string tag() const { return "ube2e"; }
  virtual std::string subnet() const { return "10.96.0"; }
  virtual std::vector<std::string> daemon_args() const { return {}; }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, TAPs)";
    for (const auto& b : {binaries().xensim, binaries().unetbackd, binaries().xl, binaries().ctl,
                          binaries().shim, binaries().script})
      if (::access(b.c_str(), X_OK) != 0) GTEST_SKIP() << b << " is not there";
    if (RunResult r = run({"iperf3", "--version"}, "/tmp"); r.status != 0)
      GTEST_SKIP() << "iperf3 is not installed";
    world_ = std::make_unique<XlWorld>(binaries(), tag(), subnet(), daemon_args());
    ASSERT_TRUE(world_->ok()) << world_->why();
  }
  void TearDown() override { world_.reset(); }

  XlWorld& w() { return *world_; }

  /// An iperf3 server on the host side (dom0's namespace) on `port`.
  void serve_iperf(int port) {
    Daemon& d =
        w().spawn_in_ns(w().ns0(), {"iperf3", "-s", "--forceflush", "-p", std::to_string(port)},
                        "iperf3-s" + std::to_string(port) + ".log");
    ASSERT_TRUE(d.wait_for("Server listening", kHangGuard)) << d.log();
    iperf_servers_[port] = {&d, 0};
  }
  /// Before a client of serve_iperf()'s server on `port`: waits until that server listens
  /// again after every test it ran. iperf3 serves one test at a time and resets a client that
  /// comes while it still tears the last test down.
  void wait_iperf_server_idle(int port) {
    const auto it = iperf_servers_.find(port);
    if (it == iperf_servers_.end()) return;
    Daemon* const server = it->second.first;
    std::size_t& tests = it->second.second;
    const auto listening = [&] {
      const std::string log = server->log();
      std::size_t n = 0;
      for (auto p = log.find("Server listening"); p != std::string::npos;
           p = log.find("Server listening", p + 1))
        ++n;
      return n;
    };
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (listening() < tests + 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    ++tests;
  }
  /// iperf3 from guest `g` to the host for `secs` seconds (`reverse`: host to guest).
  RunResult iperf(const XlWorld::Guest& g, int port, int secs, bool reverse = false,
                  std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        "iperf3", "-c", w().host_ip(), "-p", std::to_string(port), "-t", std::to_string(secs),
        "-J"};
    if (reverse) argv.push_back("-R");
    argv.insert(argv.end(), extra.begin(), extra.end());
    wait_iperf_server_idle(port);
    return w().in_ns(g.ns, argv, std::chrono::seconds(secs) + 2 * kHangGuard);
  }
  /// iperf3 moving `bytes` from guest `g` to the host (`reverse`: host to guest), however
  /// long that takes: the packet counts that follow from it do not depend on the machine's
  /// speed. 10 minutes only guard against a hang.
  RunResult iperf_bytes(const XlWorld::Guest& g, int port, const std::string& bytes,
                        bool reverse = false, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"iperf3", "-c",  w().host_ip(), "-p", std::to_string(port),
                                     "-n",     bytes, "-J"};
    if (reverse) argv.push_back("-R");
    argv.insert(argv.end(), extra.begin(), extra.end());
    wait_iperf_server_idle(port);
    return w().in_ns(g.ns, argv, 600s);
  }
  /// Guest `g` (called `what`) pings the host, then iperf3 moves 32 MiB each way on port
  /// 5201 (expect_transfer). The rates are printed as figures `<figure>_guest_to_host_bps`
  /// and `<figure>_host_to_guest_bps`. The bytes the receivers counted, guest->host and
  /// host->guest.
  std::pair<double, double> ping_and_iperf_both_ways(const XlWorld::Guest& g,
                                                     const std::string& what,
                                                     const std::string& figure) {
    EXPECT_TRUE(ping(g.ns, w().host_ip())) << "the " << what << " guest cannot ping the host";
    serve_iperf(5201);
    double received[2] = {0, 0};
    for (const bool reverse : {false, true}) {
      const RunResult r = iperf_bytes(g, 5201, "32M", reverse);
      EXPECT_EQ(r.status, 0) << r.out << r.err;
      received[reverse ? 1 : 0] = expect_transfer(r.out, 32.0 * 1024 * 1024);
      test::report_figure(figure + (reverse ? "_host_to_guest_bps" : "_guest_to_host_bps"),
                          testing::iperf_bits_per_second(r.out), "bit/s");
    }
    return {received[0], received[1]};
  }
  /// Every one of `count` echo requests from `ns` to `ip` is answered (ping sends again
  /// until it has `count` replies; 30 s guard a hang).
  bool ping(const std::string& ns, const std::string& ip, int count = 3) {
    return w().in_ns(ns, {"ping", "-c", std::to_string(count), "-i", "0.2", "-w", "30", ip}, 60s)
               .status == 0;
  }
  /// One echo request from `ns` to `ip` gets no answer within 2 s (for what must not be
  /// reachable: a slow machine can only make this pass, never fail it).
  bool unanswered(const std::string& ns, const std::string& ip) {
    return w().in_ns(ns, {"ping", "-c", "1", "-W", "2", ip}, 30s).status != 0;
  }
  /// Waits until `ns` reaches `ip` by ping (one probe per attempt); the time it took.
  std::optional<std::chrono::milliseconds> wait_reachable(const std::string& ns,
                                                          const std::string& ip,
                                                          std::chrono::seconds limit) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < limit) {
      if (w().in_ns(ns, {"ping", "-c", "1", "-W", "1", ip}, 5s).status == 0)
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - t0);
    }
    return std::nullopt;
  }
  std::string stats() { return w().ctl({"--json", "stats"}).out; }
  /// Counter `name` summed over the queues of guest `g`'s vif.
  std::uint64_t vif_counter(const XlWorld::Guest& g, const std::string& name) {
    return sum_counter(w().ctl({"--json", "stats", std::to_string(g.domid) + "/0"}).out, name);
  }
  /// Waits until counter `name` of guest `g`'s vif exceeds `above` (traffic is flowing).
  bool wait_vif_counter_above(const XlWorld::Guest& g, const std::string& name,
                              std::uint64_t above) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (vif_counter(g, name) > above) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  /// Waits until the queues report `want` bytes of XDP headroom in all (rx_xdp_headroom).
  bool xdp_headroom_is(std::uint64_t want) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string st = stats();
      if (st.find("\"rx_xdp_headroom\"") != std::string::npos &&
          sum_counter(st, "rx_xdp_headroom") == want)
        return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  /// Waits until the daemon-wide sum of counter `name` exceeds `above`.
  bool wait_counter_above(const std::string& name, std::uint64_t above) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (sum_counter(stats(), name) > above) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  /// Waits until a UDP socket is bound to `port` in namespace `ns` (a receiver is ready).
  bool wait_udp_bound(const std::string& ns, int port) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      const RunResult r = w().in_ns(
          ns, {"ss", "-H", "-u", "-l", "-n", "sport = :" + std::to_string(port)}, kHangGuard);
      if (r.status == 0 && r.out.find(':' + std::to_string(port)) != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  std::string list() { return w().ctl({"--json", "list"}).out; }
  bool wait_vif_count(std::size_t n, std::chrono::seconds limit = kHangGuard) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < limit) {
      if (reply_vifs(list()).size() == n && w().vif_links().size() == n) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  std::unique_ptr<XlWorld> world_;
  std::map<int, std::pair<Daemon*, std::size_t>> iperf_servers_;  // port: server, tests it ran
};

}  // namespace unetback::testing
