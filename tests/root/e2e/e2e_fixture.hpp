// The e2e suite's fixture: a world (xensim, unetbackd in a dom0 namespace with a Linux bridge,
// unetback-xl) per test, and what the scenarios do in it: iperf3 and ping from guests'
// namespaces, the daemon's counters and vif list through unetback-ctl.
#pragma once

#include <gtest/gtest.h>
#include <regex>
#include <utility>

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

/// Sum of every `"name": N` in a JSON text (the daemon's per-queue counters).
inline std::uint64_t sum_counter(const std::string& json, const std::string& name) {
  const std::regex re("\"" + name + "\":\\s*([0-9]+)");
  std::uint64_t total = 0;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator();
       ++it)
    total += std::stoull((*it)[1].str());
  return total;
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
    ASSERT_TRUE(d.wait_for("Server listening", 10s)) << d.log();
  }
  /// iperf3 from guest `g` to the host for `secs` seconds (`reverse`: host to guest).
  RunResult iperf(const XlWorld::Guest& g, int port, int secs, bool reverse = false,
                  std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        "iperf3", "-c", w().host_ip(), "-p", std::to_string(port), "-t", std::to_string(secs),
        "-J"};
    if (reverse) argv.push_back("-R");
    argv.insert(argv.end(), extra.begin(), extra.end());
    return w().in_ns(g.ns, argv, std::chrono::seconds(secs + 30));
  }
  /// Guest `g` (called `what`) pings the host, then runs iperf3 for 3 s each way on port
  /// 5201: guest->host and host->guest bits per second (0 after a failed step, which fails
  /// the test).
  std::pair<double, double> ping_and_iperf_both_ways(const XlWorld::Guest& g,
                                                     const std::string& what) {
    EXPECT_TRUE(ping(g.ns, w().host_ip())) << "the " << what << " guest cannot ping the host";
    serve_iperf(5201);
    const RunResult up = iperf(g, 5201, 3);
    EXPECT_EQ(up.status, 0) << up.out << up.err;
    const RunResult down = iperf(g, 5201, 3, /*reverse=*/true);
    EXPECT_EQ(down.status, 0) << down.out << down.err;
    if (up.status != 0 || down.status != 0) return {0, 0};
    const double up_bps = testing::iperf_bits_per_second(up.out);
    const double down_bps = testing::iperf_bits_per_second(down.out);
    std::cout << what << " guest->host " << up_bps / 1e9 << " Gbit/s, host->guest "
              << down_bps / 1e9 << " Gbit/s\n";
    return {up_bps, down_bps};
  }
  bool ping(const std::string& ns, const std::string& ip, int count = 3) {
    return w().in_ns(ns, {"ping", "-c", std::to_string(count), "-i", "0.2", "-W", "2", ip}, 30s)
               .status == 0;
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
  std::string list() { return w().ctl({"--json", "list"}).out; }
  bool wait_vif_count(std::size_t n, std::chrono::seconds limit) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < limit) {
      const std::string l = list();
      std::size_t count = 0;
      for (auto p = l.find("\"vif\":"); p != std::string::npos; p = l.find("\"vif\":", p + 1))
        ++count;
      if (count == n && w().vif_links().size() == n) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  std::unique_ptr<XlWorld> world_;
};

}  // namespace unetback::testing
