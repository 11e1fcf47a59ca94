// Guest lifecycle on xensim (suite e2e, root), as Xen's osstest runs it on real hosts: a guest
// saved and restored twice, ten localhost migrations in a row, a TCP stream across a
// migration, and the same with two queues. unetback-xl plays libxl (save: the guest suspends
// through control/shutdown, its devices and domain are torn down; restore: a new domain with
// the same vifs, the guest resumed in it) and the netfront-shim plays Linux netfront
// (netfront_resume: new rings and grants, the queue count negotiated again, a gratuitous ARP
// once Connected). The guest keeps its TAP and namespace throughout, so its connections live
// on. Each time the old domain's device must be gone from unetbackd entirely (TAP, grant
// mappings, descriptors) and the new one served; each outage (last ping answer before, first
// after) and the stream's stall are printed as figures, never judged.
#include <algorithm>
#include <fstream>
#include <gtest/gtest.h>
#include <iostream>
#include <sstream>
#include <thread>

#include "tests/root/e2e/e2e_fixture.hpp"

namespace unetback::testing {
namespace {

using namespace std::chrono_literals;

/// The longest gap, in ms, between two consecutive answers in `ping -D` output (the
/// outage), or -1 with fewer than two answers.
double longest_answer_gap_ms(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  double last = -1, gap = -1;
  while (std::getline(in, line)) {
    if (line.find("bytes from") == std::string::npos || !line.starts_with("[")) continue;
    const double t = std::strtod(line.c_str() + 1, nullptr);
    if (last >= 0) gap = std::max(gap, (t - last) * 1000.0);
    last = t;
  }
  return gap;
}

/// What unetbackd holds of domain `domid`: its TAP, and the mappings and descriptors of that
/// domain's memory, grant table or control page (xensim names them xensim-dom<N>-...).
std::string daemon_holdings(pid_t daemon, int domid) {
  const std::string tag = "xensim-dom" + std::to_string(domid) + "-";
  std::string out;
  std::ifstream maps("/proc/" + std::to_string(daemon) + "/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(tag) != std::string::npos) out += " map:" + line.substr(line.find(tag));
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(daemon) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code lec;
    const auto target = std::filesystem::read_symlink(it->path(), lec).string();
    if (target.find(tag) != std::string::npos) out += " fd:" + target;
  }
  return out;
}

class Lifecycle : public EndToEnd {
 protected:
  std::string tag() const override { return "ublc"; }
  std::string subnet() const override { return "10.93.0"; }

  /// The guest's new domain from unetback-xl's "domid N" (restore, migrate).
  static std::optional<XlWorld::Guest> moved(const XlWorld::Guest& g, const RunResult& r) {
    if (r.status != 0 || !r.out.starts_with("domid ")) return std::nullopt;
    XlWorld::Guest n = g;
    n.domid = std::atoi(r.out.c_str() + 6);
    return n;
  }

  /// Pings the host from `g` every 50 ms in the background (ping -D: answers timestamped).
  Daemon& start_prober(const XlWorld::Guest& g, const std::string& name) {
    return w().spawn_in_ns(g.ns, {"ping", "-D", "-i", "0.05", "-W", "1", w().host_ip()},
                           name + ".log");
  }
  /// The answers in a prober's log.
  static std::size_t answers(const Daemon& prober) {
    const std::string log = prober.log();
    std::size_t n = 0;
    for (auto p = log.find("bytes from"); p != std::string::npos; p = log.find("bytes from", p + 1))
      ++n;
    return n;
  }
  /// Waits until the prober has more than `n` answers.
  static bool wait_answers(const Daemon& prober, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + testing::kHangGuard;
    while (answers(prober) <= n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    return answers(prober) > n;
  }
  /// Waits for the prober's answers to resume (three more after the move), stops it, and
  /// returns the outage in ms.
  double stop_prober(Daemon& prober) {
    EXPECT_TRUE(wait_answers(prober, answers(prober) + 2)) << "no answer after the move\n"
                                                           << prober.log();
    prober.signal(SIGINT);
    (void)prober.wait_exit(testing::kHangGuard);
    return longest_answer_gap_ms(prober.log());
  }

  /// Nothing of domain `old` is left: no backend or frontend dir for it, its domain gone
  /// from the world, and in unetbackd no TAP, no mapping or descriptor of its memory, and
  /// the daemon's descriptor count back to `base_fds` (its ports are eventfds: a port left
  /// bound would be one more).
  void expect_torn_down(int old, std::size_t base_fds, const std::string& when) {
    const std::string tap = "vif" + std::to_string(old) + ".0";
    std::string held;
    std::size_t fds = 0;
    const auto t0 = std::chrono::steady_clock::now();
    do {
      held = daemon_holdings(w().daemon().pid(), old);
      fds = testing::open_fds(w().daemon().pid());
      if (held.empty() && fds <= base_fds && !w().link_exists(w().ns0(), tap)) break;
      std::this_thread::sleep_for(50ms);
    } while (std::chrono::steady_clock::now() - t0 < testing::kHangGuard);
    EXPECT_FALSE(w().link_exists(w().ns0(), tap)) << when << ": " << tap << " outlived its vif";
    EXPECT_EQ(held, "") << when << ": unetbackd still holds domain " << old << "'s pages";
    EXPECT_LE(fds, base_fds) << when << ": unetbackd has more descriptors than before";
    const std::string l = list();
    EXPECT_FALSE(reply_vif(l, std::to_string(old) + "/0"))
        << when << ": unetbackd still lists the old vif: " << l;
    const RunResult xl_list = w().xl({"list"});
    std::istringstream rows(xl_list.out);
    std::string row;
    while (std::getline(rows, row)) {
      EXPECT_FALSE(row.starts_with(std::to_string(old) + " "))
          << when << ": domain " << old << " still in the world: " << row;
    }
  }

  /// The vif of `g` is served: Connected in unetbackd's list with `queues` queues, and the
  /// guest answers ping.
  void expect_served(const XlWorld::Guest& g, int queues, const std::string& when) {
    const std::string l = list();
    const std::string id = std::to_string(g.domid) + "/0";
    const auto vif = reply_vif(l, id);
    ASSERT_TRUE(vif) << when << ": vif " << id << " not served: " << l;
    EXPECT_EQ(ctl::field(*vif, "queues"), std::to_string(queues)) << when << ": " << l;
    EXPECT_TRUE(ping(g.ns, w().host_ip(), 2)) << when << ": no ping after the move";
  }

  /// A TCP stream from the host to `g` (iperf3 -R -t 10, 100 ms intervals measured where
  /// the data arrives, in the guest) with one migration once it flows: the stream ends
  /// without an error (a reset or a lost control connection fails iperf3), and the new vif
  /// carried host->guest packets of it (its data, or at least the end-of-test exchange when
  /// the move outlasted the 10 s). The stall (the longest run of intervals below a tenth of
  /// the median) is the figure lifecycle_stream_stall_ms_q<queues>. The moved guest.
  std::optional<XlWorld::Guest> stream_across_migration(const XlWorld::Guest& g, int queues) {
    serve_iperf(5201);
    const std::size_t base_fds = testing::open_fds(w().daemon().pid());
    const std::uint64_t idle = vif_counter(g, "rx_packets");
    Daemon& stream = w().spawn_in_ns(g.ns,
                                     {"iperf3", "-c", w().host_ip(), "-p", "5201", "-t", "10", "-i",
                                      "0.1", "-R", "-J", "--connect-timeout", "5000"},
                                     "stream.json");
    EXPECT_TRUE(wait_vif_counter_above(g, "rx_packets", idle + 1000)) << "the stream never ran";
    const RunResult m = w().xl({"migrate", g.name, "localhost"});
    auto n = moved(g, m);
    EXPECT_TRUE(n) << "migrate exited " << m.status << ": " << m.err;
    const auto st = stream.wait_exit(90s);
    EXPECT_TRUE(st.has_value());
    // iperf3 fails on a reset or a closed control connection: the stream survived.
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << stream.log();
    EXPECT_GT(testing::iperf_bytes_received(stream.log()), 0) << stream.log();
    if (n) {
      EXPECT_GT(vif_counter(*n, "rx_packets"), 0U) << "nothing of the stream crossed the new vif";
    }
    const auto rates = testing::iperf_interval_rates(stream.log());
    // The stall: the longest run of 100 ms intervals below a tenth of the median rate.
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    std::size_t stalled = 0, run = 0;
    for (const double r : rates) {
      run = r < median / 10 ? run + 1 : 0;
      stalled = std::max(stalled, run);
    }
    const std::string q = "_q" + std::to_string(queues);
    test::report_figure("lifecycle_stream_stall_ms" + q, static_cast<double>(stalled * 100), "ms");
    test::report_figure("lifecycle_stream_across_migration_bps" + q,
                        testing::iperf_bits_per_second(stream.log()), "bit/s");
    if (n) {
      expect_torn_down(g.domid, base_fds, "after the migration");
      expect_served(*n, queues, "after the migration");
    }
    return n;
  }
};

TEST_F(Lifecycle, SaveAndRestoreTwiceBringsTheVifBackConnectedWithPingAndIperf3) {
  auto g = w().create_guest(1);
  ASSERT_TRUE(g) << w().why();
  ASSERT_TRUE(ping(g->ns, w().host_ip()));
  const std::size_t base_fds = testing::open_fds(w().daemon().pid());
  for (int round = 1; round <= 2; ++round) {
    const std::string when = "save/restore " + std::to_string(round);
    const std::string image = w().dir() + "/g1.save" + std::to_string(round);
    const pid_t guest = w().guest_pid(*g);
    ASSERT_GT(guest, 0);
    Daemon& prober = start_prober(*g, "prober" + std::to_string(round));
    ASSERT_TRUE(wait_answers(prober, 0)) << prober.log();  // answered before the save
    const RunResult s = w().xl({"save", g->name, image});
    ASSERT_EQ(s.status, 0) << when << ": " << s.err;
    // Saved: the device and the domain are gone, the guest process waits, suspended.
    expect_torn_down(g->domid, base_fds, when + ", saved");
    EXPECT_EQ(::kill(guest, 0), 0) << "the save must not stop the guest process";
    std::ifstream img(image);
    ASSERT_TRUE(img.good()) << image;
    const RunResult r = w().xl({"restore", image});
    auto n = moved(*g, r);
    ASSERT_TRUE(n) << when << ": restore exited " << r.status << ": " << r.err;
    EXPECT_NE(n->domid, g->domid) << "a restored domain gets a new domid";
    EXPECT_EQ(w().guest_pid(*n), guest) << "the same guest process runs the new domain";
    const double outage = stop_prober(prober);
    ASSERT_GT(outage, 0) << prober.log();
    test::report_figure("lifecycle_saverestore" + std::to_string(round) + "_outage_ms", outage,
                        "ms");
    expect_served(*n, 1, when);
    g = n;
  }
  ping_and_iperf_both_ways(*g, "restored", "lifecycle_restored");
  // The restored guest is destroyed like any other.
  ASSERT_EQ(w().destroy_guest(*g).status, 0);
  expect_torn_down(g->domid, base_fds, "destroyed");
}

TEST_F(Lifecycle, TenLocalhostMigrationsEachTearTheOldDeviceDownAndServeTheNewOne) {
  auto g = w().create_guest(1);
  ASSERT_TRUE(g) << w().why();
  ASSERT_TRUE(ping(g->ns, w().host_ip()));
  const std::size_t base_fds = testing::open_fds(w().daemon().pid());
  double worst = 0;
  for (int round = 1; round <= 10; ++round) {
    const std::string when = "migration " + std::to_string(round);
    Daemon& prober = start_prober(*g, "prober" + std::to_string(round));
    ASSERT_TRUE(wait_answers(prober, 0)) << prober.log();  // answered before the migration
    const RunResult m = w().xl({"migrate", g->name, "localhost"});
    auto n = moved(*g, m);
    ASSERT_TRUE(n) << when << ": migrate exited " << m.status << ": " << m.err;
    const double outage = stop_prober(prober);
    ASSERT_GT(outage, 0) << prober.log();
    worst = std::max(worst, outage);
    std::cout << when << ": domain " << g->domid << " -> " << n->domid << "\n";
    test::report_figure("lifecycle_migrate" + std::to_string(round) + "_outage_ms", outage, "ms");
    expect_torn_down(g->domid, base_fds, when);
    expect_served(*n, 1, when);
    g = n;
  }
  test::report_figure("lifecycle_migrate_worst_outage_ms", worst, "ms");
}

TEST_F(Lifecycle, ATcpStreamRunsAcrossAMigrationWithoutAReset) {
  auto g = w().create_guest(1);
  ASSERT_TRUE(g) << w().why();
  ASSERT_TRUE(ping(g->ns, w().host_ip()));
  (void)stream_across_migration(*g, 1);
}

TEST_F(Lifecycle, TwoQueuesAreNegotiatedAgainOnResumeAndTheStreamSurvives) {
  auto g = w().create_guest(1, {}, {"--queues", "2"});
  ASSERT_TRUE(g) << w().why();
  ASSERT_TRUE(ping(g->ns, w().host_ip()));
  expect_served(*g, 2, "before the migration");
  auto n = stream_across_migration(*g, 2);
  ASSERT_TRUE(n);
  // The backend now offers one queue only: the resumed frontend takes what is offered.
  ASSERT_EQ(w().ctl({"set", "max-queues", "1"}).status, 0);
  const RunResult m = w().xl({"migrate", n->name, "localhost"});
  auto n2 = moved(*n, m);
  ASSERT_TRUE(n2) << m.err;
  expect_served(*n2, 1, "after a migration to a one-queue backend");
}

}  // namespace
}  // namespace unetback::testing
