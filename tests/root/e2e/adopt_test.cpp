// A backend restart the guests do not notice (issue 20), end to end on xensim: TCP streams
// both ways, on a 1-queue and a 2-queue guest, run across a planned takeover (`unetbackd
// --takeover`) and across a SIGKILL plus a restart. The streams survive (iperf3 exits 0), a
// xenstore watch on both `state` keys of each vif fires only its initial event (nothing is
// written: both stay 4), each TAP is the same interface (ifindex) still on the bridge, and
// neither the daemon nor xensim holds more descriptors than before. Each guest's pinger gets
// answers again after the restart; the longest gap between a guest's 10 ms pings is printed as
// a figure, never judged. A vif whose record is corrupt reconnects alone;
// an orderly stop still closes everything; the old daemon killed at any step of a takeover
// leaves every vif served.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/util/unique_fd.hpp"
#include "tests/root/e2e/e2e_fixture.hpp"
#include "tests/support/notify_socket.hpp"

namespace unetback::testing {
namespace {

class Adoption : public EndToEnd {
 protected:
  std::string tag() const override { return "ubad"; }
  std::string subnet() const override { return "10.97.0"; }

  std::string state_dir() { return w().world() + "/unetbackd-dom0-state"; }
  std::string xs_env() { return "XENSTORED_PATH=" + w().world() + "/dom0.sock"; }

  /// `xenstore-watch` on `path`: every line it prints is one watch event.
  Daemon& watch(const std::string& path, const std::string& log) {
    return w().spawn_in_ns(w().ns0(), {"env", xs_env(), "xenstore-watch", path}, log);
  }
  static std::size_t lines_of(const std::string& s) {
    return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
  }
  int ifindex(const XlWorld::Guest& g) {
    return std::atoi(
        w().in_ns(w().ns0(), {"cat", "/sys/class/net/" + g.tap() + "/ifindex"}).out.c_str());
  }
  std::string master(const XlWorld::Guest& g) {
    const RunResult r = w().in_ns(w().ns0(), {"ip", "-o", "link", "show", "dev", g.tap()});
    const auto at = r.out.find("master ");
    return at == std::string::npos ? "" : r.out.substr(at + 7, r.out.find(' ', at + 7) - at - 7);
  }
  /// The `adopted` of vif <domid>/0 in `unetback-ctl --json list`.
  std::string adopted(const XlWorld::Guest& g) {
    const std::string l = list();
    const auto vif = reply_vif(l, std::to_string(g.domid) + "/0");
    return vif ? ctl::field(*vif, "adopted") : "(none in " + l + ")";
  }
  /// `ping -D` output's reply times (seconds since the epoch).
  static std::vector<double> reply_times(const std::string& out) {
    const std::regex re("^\\[([0-9]+\\.[0-9]+)\\]");
    std::vector<double> t;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (line.find("bytes from") != std::string::npos && std::regex_search(line, m, re))
        t.push_back(std::stod(m[1].str()));
    }
    return t;
  }
  /// The longest gap between two replies (ms) among the gaps that end in [from, to): the
  /// restart's (from = the signal, to = the first few answers after it) or, before it, what
  /// the loaded machine does anyway.
  static double longest_gap_ms(const std::vector<double>& t, double from, double to) {
    double worst = 0;
    for (std::size_t i = 1; i < t.size(); ++i)
      if (t[i] >= from && t[i] < to) worst = std::max(worst, (t[i] - t[i - 1]) * 1000);
    return worst;
  }
  /// Waits until `ping` has three replies after `after` (seconds since the epoch).
  static bool wait_replies_after(const Daemon& ping, double after) {
    const auto count = [&] {
      const auto t = reply_times(ping.log());
      return std::count_if(t.begin(), t.end(), [&](double x) { return x >= after; });
    };
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (count() < 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    return count() >= 3;
  }
  static double now_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  enum class Restart { takeover, crash, upgrade };

  /// A planned takeover (`unetbackd --takeover`; the old daemon exits 4) or a SIGKILL and a
  /// new daemon; returns once the new one serves.
  void restart(Restart how) {
    if (how == Restart::takeover) {
      ASSERT_TRUE(w().start_successor({"--takeover"}));
      const auto st = w().predecessor().wait_exit(kHangGuard);
      ASSERT_TRUE(st) << "the old daemon did not hand over\n" << w().predecessor().log();
      EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 4) << "status " << *st << "\n"
                                                           << w().predecessor().log();
    } else {
      w().kill_daemon(SIGKILL);
      ASSERT_TRUE(w().start_successor({}));
    }
    ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();
  }

  /// The scenario: two guests (1 and 2 queues), a stream each way on each, the restart in
  /// the middle.
  void restart_under_load(Restart how) {
    auto g1 = w().create_guest(1);
    ASSERT_TRUE(g1) << w().why();
    auto g2 = w().create_guest(2, {}, {"--queues", "2"});
    ASSERT_TRUE(g2) << w().why();
    ASSERT_TRUE(ping(g1->ns, w().host_ip(), 1));
    ASSERT_TRUE(ping(g2->ns, w().host_ip(), 1));
    const std::vector<const XlWorld::Guest*> guests{&*g1, &*g2};
    std::map<int, int> idx;
    for (const auto* g : guests) {
      idx[g->domid] = ifindex(*g);
      ASSERT_GT(idx[g->domid], 0);
      ASSERT_EQ(master(*g), XlWorld::kBridge);
    }
    std::vector<Daemon*> watches;
    for (const auto* g : guests) {
      const std::string d = std::to_string(g->domid);
      watches.push_back(&watch("/local/domain/0/backend/vif/" + d + "/0/state", "wb" + d + ".log"));
      watches.push_back(&watch("/local/domain/" + d + "/device/vif/0/state", "wf" + d + ".log"));
    }
    for (int port = 5201; port <= 5204; ++port) serve_iperf(port);
    const std::size_t daemon_fds = open_fds(w().daemon().pid());
    const std::size_t xensim_fds = open_fds(w().xensim_pid());

    std::map<int, std::uint64_t> idle;
    for (const auto* g : guests) idle[g->domid] = vif_counter(*g, "rx_packets");
    std::vector<Daemon*> streams;
    int port = 5201;
    for (const auto* g : guests) {
      for (const bool reverse : {false, true}) {
        std::vector<std::string> argv{"iperf3", "-c", w().host_ip(), "-p", std::to_string(port),
                                      "-t",     "6",  "-J"};
        if (reverse) argv.push_back("-R");
        streams.push_back(&w().spawn_in_ns(g->ns, argv, "stream" + std::to_string(port) + ".json"));
        ++port;
      }
    }
    // The pingers run until they are stopped below, once they were answered after the restart.
    std::vector<Daemon*> pings;
    for (const auto* g : guests) {
      pings.push_back(&w().spawn_in_ns(g->ns, {"ping", "-D", "-i", "0.01", w().host_ip()},
                                       "ping" + std::to_string(g->domid) + ".log"));
    }
    // The restart comes once the streams flow (both directions carry data through each vif)
    // and every pinger has been answered.
    for (const auto* g : guests) {
      ASSERT_TRUE(wait_vif_counter_above(*g, "rx_packets", idle[g->domid] + 1000))
          << g->name << ": the streams never ran";
    }
    for (auto* p : pings) {
      ASSERT_TRUE(wait_replies_after(*p, 0)) << "no answer before the restart\n" << p->log();
    }

    const std::string old_log_name = how == Restart::takeover  ? "takeover"
                                     : how == Restart::upgrade ? "upgrade"
                                                               : "crash";
    const pid_t pid_before = w().daemon().pid();
    const double restart_at = now_s();
    if (how == Restart::upgrade) {
      // The daemon starts its program file again as its successor, which takes over: the
      // old process exits 4 and the successor is the world's daemon from then on.
      const RunResult r = w().ctl({"upgrade"});
      ASSERT_EQ(r.status, 0) << r.out << r.err << w().daemon().log();
      EXPECT_NE(r.out.find("handed over to its successor"), std::string::npos) << r.out;
      std::cout << r.out;
      const auto st = w().daemon().wait_exit(kHangGuard);
      ASSERT_TRUE(st) << "the old daemon did not hand over\n" << w().daemon().log();
      EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 4) << "status " << *st;
      const std::string status = w().ctl({"--json", "status"}).out;
      const pid_t successor = static_cast<pid_t>(testing::sum_counter(status, "pid"));
      ASSERT_GT(successor, 0) << status;
      EXPECT_NE(successor, pid_before) << status;
      w().follow_daemon(successor);
      // Where the daemon's part went: its milestones from the request to the last adoption.
      const std::string log = w().daemon().log();
      const std::regex ms("milestone (\\w+) realtime=([0-9.]+)");
      std::string split;
      double from = 0, prev = 0;
      for (auto it = std::sregex_iterator(log.begin(), log.end(), ms); it != std::sregex_iterator();
           ++it) {
        const std::string name = (*it)[1];
        const double t = std::stod((*it)[2]);
        if (name == "upgrade_requested") from = prev = t;
        if (from == 0) continue;
        split += " " + name + " +" + std::to_string(static_cast<int>((t - prev) * 1000)) + "ms";
        prev = t;
      }
      std::cout << "upgrade milestones:" << split << "\n";
    } else {
      restart(how);
      ASSERT_FALSE(HasFatalFailure());
    }
    ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();

    // Each guest's pinger is answered after the restart: a few replies after the signal.
    for (std::size_t i = 0; i < guests.size(); ++i) {
      EXPECT_TRUE(wait_replies_after(*pings[i], restart_at)) << "no reply after the restart\n"
                                                             << pings[i]->log();
      pings[i]->signal(SIGINT);
      (void)pings[i]->wait_exit(kHangGuard);
    }
    for (auto* s : streams) {
      const auto st = s->wait_exit(90s);
      ASSERT_TRUE(st) << s->log();
      EXPECT_EQ(*st, 0) << "the TCP stream did not survive\n" << s->log();
      EXPECT_GT(iperf_bytes_received(s->log()), 0) << s->log();
    }
    for (std::size_t i = 0; i < guests.size(); ++i) {
      const auto t = reply_times(pings[i]->log());
      // The restart's gap: the longest one ending after the signal (the new daemon's start
      // included); and, for scale, the longest before it (load alone). Figures both.
      const std::string q = "_q" + std::to_string(i + 1);
      test::report_figure("adopt_" + old_log_name + "_gap_ms" + q,
                          longest_gap_ms(t, restart_at, 1e18), "ms");
      test::report_figure("adopt_" + old_log_name + "_gap_before_ms" + q,
                          longest_gap_ms(t, 0, restart_at), "ms");
    }
    for (const auto* g : guests) {
      EXPECT_EQ(adopted(*g), how == Restart::crash ? "recovered" : "taken_over");
      EXPECT_EQ(ifindex(*g), idx[g->domid]) << "the same TAP";
      EXPECT_EQ(master(*g), XlWorld::kBridge) << "still on the bridge";
    }
    // Nothing was written to either state key: each watch saw its initial event only.
    for (auto* wt : watches) {
      wt->stop();
      EXPECT_EQ(lines_of(wt->log()), 1U) << wt->log();
    }
    EXPECT_EQ(open_fds(w().daemon().pid()), daemon_fds) << "the daemon's descriptors";
    // xensim: the dead daemon's ports, eventfds and pin tables went with its connection.
    EXPECT_LE(open_fds(w().xensim_pid()), xensim_fds) << "xensim's (ports, grant tables)";
    const std::string l = list();
    EXPECT_TRUE(reply_has_vif_with(l, "queues", "2")) << l;
  }
};

TEST_F(Adoption, APlannedTakeoverKeepsTcpStreamsBothWaysAndBothStatesAt4) {
  restart_under_load(Restart::takeover);
}

TEST_F(Adoption, ACrashAndARestartKeepTcpStreamsBothWaysAndBothStatesAt4) {
  restart_under_load(Restart::crash);
}

// `unetback-ctl upgrade`: the daemon starts its program file again with --takeover (the TAP
// queues passed as LISTEN_FDS) and serves on while that successor sets up; the successor then
// asks for the handover and takes every vif over, with no service manager in between.
TEST_F(Adoption, AnUpgradeHandsEveryVifToItsSuccessorAndKeepsTcpStreamsBothWaysAndStatesAt4) {
  restart_under_load(Restart::upgrade);
  const std::string log = w().daemon().log();
  EXPECT_NE(log.find("to take over; serving until it asks for the handover"), std::string::npos)
      << log;
  EXPECT_NE(log.find("SIGUSR2: handing every vif over"), std::string::npos) << log;
  // The successor read the tunables and started its threads before it asked.
  EXPECT_LT(log.rfind("milestone tunables_read"), log.rfind("asked pid")) << log;
  EXPECT_NE(w().daemon().log().find("passed at start (LISTEN_FDS): 8 TAP queue fd(s) of 2 TAP(s)"),
            std::string::npos)
      << "every queue of both TAPs (4 each: max-queues) crossed the exec\n"
      << w().daemon().log();
}

// A guest with request-multicast-control (the Windows PV rules) sends its groups once, when
// it joins them. A successor that adopts the vif, after a crash or a planned takeover, filters
// with the groups the record kept: dom0 still finds the guest by IPv6 neighbour discovery
// (to the guest's solicited-node group), with its neighbour cache emptied before each ping,
// and a group the guest never joined is still kept out.
TEST_F(Adoption, AnAdoptedVifKeepsTheGuestsMulticastGroupsAndIpv6NeighbourDiscoveryWorks) {
  auto g = w().create_guest(1, {"--mode", "xenvif"});
  ASSERT_TRUE(g) << w().why();
  // The guest's link-local address, once duplicate address detection is over.
  std::string ll;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (ll.empty() && std::chrono::steady_clock::now() < deadline) {
    const RunResult r =
        w().in_ns(g->ns, {"ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link"});
    std::smatch m;
    if (r.out.find("tentative") == std::string::npos &&
        std::regex_search(r.out, m, std::regex("inet6 (fe80::[0-9a-f:]+)/")))
      ll = m[1].str();
    if (ll.empty()) std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(ll.empty()) << "no link-local address on the guest's eth0";
  const auto ping6 = [&] {
    (void)w().in_ns(w().ns0(), {"ip", "-6", "neigh", "flush", "dev", XlWorld::kBridge});
    return w().in_ns(
                  w().ns0(),
                  {"ping", "-6", "-c", "3", "-i", "0.2", "-w", "30", ll + "%" + XlWorld::kBridge},
                  60s)
               .status == 0;
  };
  ASSERT_TRUE(ping6()) << "no IPv6 before any restart";
  ASSERT_GT(vif_counter(*g, "tx_mcast_requests"), 0U) << "the guest sent no group";
  for (const Restart how : {Restart::crash, Restart::takeover}) {
    const std::string what = how == Restart::crash ? "crash" : "takeover";
    restart(how);
    ASSERT_FALSE(HasFatalFailure()) << what;
    EXPECT_EQ(adopted(*g), how == Restart::crash ? "recovered" : "taken_over") << what;
    EXPECT_TRUE(ping6()) << "no IPv6 neighbour discovery after the " << what << "\n" << stats();
    // The guest sent nothing again: the groups came from the record.
    EXPECT_EQ(vif_counter(*g, "tx_mcast_requests"), 0U) << what;
    // And the filter is on: a group the guest never joined stays out.
    (void)w().in_ns(w().ns0(), {"ping", "-6", "-c", "2", "-i", "0.2", "-w", "2",
                                std::string("ff02::4242%") + XlWorld::kBridge});
    EXPECT_TRUE(wait_vif_counter_above(*g, "rx_dropped_mcast_filter", 0))
        << "a group the guest did not join reached it after the " << what;
  }
}

// A guest that changed its XDP headroom after connecting (Reconfiguring, then Reconfigured)
// keeps the new headroom across a planned takeover, which connects from the keys in the
// record rather than from xenstore: the record holds each value as it was applied.
TEST_F(Adoption, APlannedTakeoverKeepsTheXdpHeadroomTheGuestChangedToAfterConnecting) {
  const std::string knob = w().dir() + "/xdp-headroom";
  std::ofstream(knob) << "0\n";
  auto g = w().create_guest(1, {"--xdp-headroom-file", knob});
  ASSERT_TRUE(g) << w().why();
  ASSERT_TRUE(xdp_headroom_is(0)) << stats();
  std::ofstream(knob) << "256\n";
  ASSERT_TRUE(xdp_headroom_is(256)) << stats();
  restart(Restart::takeover);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(adopted(*g), "taken_over");
  EXPECT_TRUE(xdp_headroom_is(256)) << "the successor took the vif over with a stale headroom\n"
                                    << stats();
  // And the successor follows the next change, and is reachable across it.
  std::ofstream(knob) << "0\n";
  EXPECT_TRUE(xdp_headroom_is(0)) << stats();
  EXPECT_TRUE(ping(g->ns, w().host_ip(), 2));
}

// A TAP's queue length is what the host may pile up in dom0 for a guest that stops reading:
// every vif's TAP has the tap-queue-len in force, also a TAP that an older daemon (or another
// tool) made with another length and this one adopts after a crash.
TEST_F(Adoption, EveryTapHoldsTheQueueLengthInForceAlsoOneAdoptedFromAnOlderDaemon) {
  auto g = w().create_guest(1);
  ASSERT_TRUE(g) << w().why();
  const auto qlen = [&] {
    return w().in_ns(w().ns0(), {"cat", "/sys/class/net/" + g->tap() + "/tx_queue_len"}).out;
  };
  EXPECT_EQ(qlen(), "500\n");
  w().kill_daemon(SIGKILL);
  ASSERT_EQ(
      w().in_ns(w().ns0(), {"ip", "link", "set", "dev", g->tap(), "txqueuelen", "1000"}).status, 0);
  ASSERT_TRUE(w().start_successor({"--tap-queue-len", "48"}));
  ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();
  EXPECT_EQ(adopted(*g), "recovered");
  EXPECT_EQ(qlen(), "48\n");
  EXPECT_TRUE(ping(g->ns, w().host_ip(), 2));
}

TEST_F(Adoption, AVifWhoseRecordIsCorruptReconnectsAloneWhileTheOtherIsRecovered) {
  auto g1 = w().create_guest(1);
  ASSERT_TRUE(g1) << w().why();
  auto g2 = w().create_guest(2);
  ASSERT_TRUE(g2) << w().why();
  ASSERT_TRUE(ping(g1->ns, w().host_ip(), 1));
  ASSERT_TRUE(ping(g2->ns, w().host_ip(), 1));
  w().kill_daemon(SIGKILL);
  {
    // The ring indices of queue 0's TX ring (after the 64-byte header and 16 bytes of refs
    // and ports): an impossible req_cons.
    std::fstream f(state_dir() + "/vif-" + std::to_string(g2->domid) + "-0.state",
                   std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.is_open());
    f.seekp(64 + 16);
    const std::uint32_t junk = 0xdeadbeef;
    f.write(reinterpret_cast<const char*>(&junk), sizeof junk);
  }
  Daemon& wf1 =
      watch("/local/domain/" + std::to_string(g1->domid) + "/device/vif/0/state", "wf1.log");
  ASSERT_TRUE(w().start_successor({}));
  ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();
  EXPECT_TRUE(wait_reachable(g2->ns, w().host_ip(), kHangGuard)) << w().daemon().log();
  EXPECT_TRUE(ping(g1->ns, w().host_ip(), 2));
  EXPECT_EQ(adopted(*g1), "recovered");
  EXPECT_EQ(adopted(*g2), "reconnected");
  wf1.stop();
  EXPECT_EQ(lines_of(wf1.log()), 1U) << "the recovered guest saw no state change\n" << wf1.log();
  serve_iperf(5201);
  const RunResult r = iperf(*g2, 5201, 2);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

TEST_F(Adoption, AnOrderlyStopStillClosesEveryVifAndLeavesNothingBehind) {
  auto g1 = w().create_guest(1, {}, {"--queues", "2"});
  ASSERT_TRUE(g1) << w().why();
  ASSERT_TRUE(ping(g1->ns, w().host_ip(), 1));
  EXPECT_TRUE(
      std::filesystem::exists(state_dir() + "/vif-" + std::to_string(g1->domid) + "-0.state"));
  w().kill_daemon(SIGTERM);
  EXPECT_TRUE(w().vif_links().empty()) << "the persistent TAPs are gone";
  EXPECT_TRUE(std::filesystem::is_empty(state_dir())) << "the records are gone";
  const RunResult st =
      run({"env", xs_env(), "xenstore-read",
           "/local/domain/0/backend/vif/" + std::to_string(g1->domid) + "/0/state"},
          w().dir());
  EXPECT_EQ(st.out, "6\n");
}

// UNETBACKD_DIE_AT_HANDOVER_STEP=N makes a daemon kill itself (SIGKILL) at step N of its
// handover (1: nothing done yet, 2: its first vif handed over, 3: every vif handed over, 4: its
// xenstore owner node released). Each daemon of the chain is started with the next step and
// asked to hand over by the one after it: whatever the step, every vif ends served (taken over
// or recovered), never wedged. The variable is read only by a unetbackd built with
// -Dfault_injection=true (the tests' build; a package's daemon has no such code).
TEST_F(Adoption, TheOldDaemonKilledAtEveryStepOfATakeoverLeavesEveryVifServed) {
#if !UNETBACKD_FAULT_INJECTION
  GTEST_SKIP() << "unetbackd is built without -Dfault_injection=true (tools/lab.sh configure-san "
                  "sets the tests' build up with it)";
#endif
  auto g1 = w().create_guest(1);
  ASSERT_TRUE(g1) << w().why();
  auto g2 = w().create_guest(2, {}, {"--queues", "2"});
  ASSERT_TRUE(g2) << w().why();
  constexpr int kSteps = 4;
  for (int step = 0; step <= kSteps; ++step) {
    // This daemon takes over from the one serving now (which dies at `step`, or, at 0, hands
    // over whole) and will itself die at step + 1 when the next one asks.
    std::vector<std::string> env;
    if (step < kSteps) env.push_back("UNETBACKD_DIE_AT_HANDOVER_STEP=" + std::to_string(step + 1));
    ASSERT_TRUE(w().start_successor({"--takeover"}, env));
    const auto st = w().predecessor().wait_exit(kHangGuard);
    ASSERT_TRUE(st) << "step " << step << ": the old daemon is still there";
    if (step > 0) {
      EXPECT_TRUE(WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL) << "step " << step;
    }
    ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();
    for (const auto* g : {&*g1, &*g2}) {
      EXPECT_TRUE(wait_reachable(g->ns, w().host_ip(), kHangGuard))
          << "step " << step << ": " << g->name << " is not served\n"
          << w().daemon().log();
      const std::string a = adopted(*g);
      EXPECT_TRUE(a == "taken_over" || a == "recovered") << "step " << step << ": " << a;
      std::cout << "killed at step " << step << ": " << g->name << " " << a << "\n";
    }
  }
}

/// The service manager's side of sd_notify(3) for the daemons of one test: a datagram socket
/// at $NOTIFY_SOCKET that keeps what FDSTORE=1 sends (under its FDNAME) and drops what
/// FDSTOREREMOVE=1 names, as systemd's fd store does; every other notification (READY=1,
/// RELOADING=1, MAINPID=...) is kept in order, for the tests to read.
class ServiceManagerFdStore {
 public:
  ServiceManagerFdStore() : sock_("/tmp/ubad-notify-" + std::to_string(::getpid()) + ".sock") {}
  [[nodiscard]] bool ok() const { return sock_.ok(); }
  [[nodiscard]] const std::string& path() const { return sock_.path(); }

  /// Reads every notification sent so far.
  void drain() {
    while (auto n = sock_.receive()) {
      const std::string& t = n->text;
      const auto name_at = t.find("FDNAME=");
      const std::string name = name_at == std::string::npos
                                   ? ""
                                   : t.substr(name_at + 7, t.find('\n', name_at) - name_at - 7);
      if (t.find("FDSTOREREMOVE=1") != std::string::npos) {
        stored_.erase(name);
      } else if (t.find("FDSTORE=1") != std::string::npos) {
        for (auto& fd : n->fds) stored_[name].push_back(std::move(fd));
      } else if (!t.starts_with("WATCHDOG=1")) {
        messages_.push_back(t);
      }
    }
  }
  /// The notifications other than the fd store's since the last call, oldest first, the first
  /// line of each.
  std::string messages() {
    drain();
    std::string out;
    for (const auto& m : messages_) out += m.substr(0, m.find('\n')) + "\n";
    messages_.clear();
    return out;
  }
  /// The stored fds whose name starts with `prefix`, in name order (one per name).
  std::vector<std::pair<std::string, int>> stored(const std::string& prefix = "") {
    drain();
    std::vector<std::pair<std::string, int>> out;
    for (const auto& [name, fds] : stored_) {
      for (const auto& fd : fds)
        if (name.starts_with(prefix)) out.emplace_back(name, fd.get());
    }
    return out;
  }

 private:
  test::NotifySocket sock_;
  std::map<std::string, std::vector<UniqueFd>> stored_;
  std::vector<std::string> messages_;
};

/// unetbackd started as systemd starts unetbackd.service: $NOTIFY_SOCKET set, and after a crash
/// the fd store passed to the next daemon.
class AdoptionWithAnFdStore : public Adoption {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store_.ok()) << "cannot bind " << store_.path();
    ::setenv("NOTIFY_SOCKET", store_.path().c_str(), 1);
    Adoption::SetUp();
  }
  void TearDown() override {
    Adoption::TearDown();
    ::unsetenv("NOTIFY_SOCKET");
  }
  bool carrier(const XlWorld::Guest& g) {
    return w().in_ns(w().ns0(), {"ip", "-o", "link", "show", "dev", g.tap()})
               .out.find("LOWER_UP") != std::string::npos;
  }
  ServiceManagerFdStore store_;
};

// A crash under systemd with the fd store (unetbackd.service has FileDescriptorStoreMax=): the
// TAP's queues stay open in the service manager while no daemon runs, so the TAP keeps its
// carrier (its bridge port and dom0's ARP entry for the guest stay) and what the host sends
// meanwhile waits in its queue. The next daemon gets the queues back (LISTEN_FDS), takes them
// for the vif it recovers, and the pings sent while no daemon ran are all answered.
TEST_F(AdoptionWithAnFdStore, ACrashLeavesTheTapItsCarrierAndTheHostsFramesUntilTheNextDaemon) {
  auto g1 = w().create_guest(1);
  ASSERT_TRUE(g1) << w().why();
  ASSERT_TRUE(ping(g1->ns, w().host_ip(), 1));
  const std::string tap_names = "tap-" + std::to_string(ifindex(*g1)) + "-q";
  // Every queue of the TAP (max-queues, 4 by default) is stored once the guest is connected.
  EXPECT_EQ(store_.stored(tap_names).size(), 4U) << w().daemon().log();

  w().kill_daemon(SIGKILL);
  EXPECT_TRUE(carrier(*g1)) << "the kept queues hold the TAP's carrier on";
  // The host pings the guest while no daemon runs: the requests wait in the TAP. With -O ping
  // reports each request left unanswered when it sends the next: the report of the fourth
  // means the fifth and last went out.
  Daemon& pinger = w().spawn_in_ns(
      w().ns0(), {"ping", "-O", "-c", "5", "-i", "0.1", "-W", "30", g1->ip}, "gap-ping.log");
  ASSERT_TRUE(pinger.wait_for("no answer yet for icmp_seq=4", kHangGuard)) << pinger.log();
  EXPECT_TRUE(carrier(*g1));

  ASSERT_TRUE(w().start_successor_with_fds({}, store_.stored()));
  ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();
  EXPECT_TRUE(w().daemon().wait_for("TAP queues kept open by the service manager: 4", kHangGuard))
      << w().daemon().log();
  const auto st = pinger.wait_exit(60s);
  ASSERT_TRUE(st) << pinger.log();
  EXPECT_EQ(*st, 0) << "pings sent while no daemon ran are answered\n" << pinger.log();
  EXPECT_NE(pinger.log().find("5 received"), std::string::npos) << pinger.log();
  EXPECT_EQ(adopted(*g1), "recovered");
  EXPECT_TRUE(ping(g1->ns, w().host_ip(), 2));
  // The new daemon keeps them again, once each; the guest's destroy lets them go.
  EXPECT_EQ(store_.stored(tap_names).size(), 4U) << w().daemon().log();
  const RunResult d = w().xl({"destroy", g1->name});
  EXPECT_EQ(d.status, 0) << d.out << d.err;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (!store_.stored(tap_names).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(store_.stored(tap_names).empty()) << "a destroyed vif leaves nothing in the store";
}

// An upgrade under a service manager whose new binary cannot start: the daemon serves on and is
// ready again, unetback-ctl says why and exits 1. With a working binary back in place, the next
// upgrade's successor takes over and the old daemon names it the unit's main process (MAINPID=)
// before it exits.
TEST_F(AdoptionWithAnFdStore, AnUpgradeWhoseSuccessorFailsServesOnAndTheNextOneTakesOver) {
  namespace fs = std::filesystem;
  const std::string program = w().dir() + "/unetbackd-installed";
  const std::string built = w().bins().unetbackd;
  fs::copy_file(built, program);
  w().kill_daemon(SIGTERM);
  w().set_daemon_binary(program);
  ASSERT_TRUE(w().start_successor({}));
  ASSERT_TRUE(w().daemon().wait_for("serving", kHangGuard)) << w().daemon().log();
  auto g1 = w().create_guest(1);
  ASSERT_TRUE(g1) << w().why();
  ASSERT_TRUE(ping(g1->ns, w().host_ip(), 1));
  const pid_t old = w().daemon().pid();

  // A package upgrade put a binary there that cannot run.
  const auto install = [&](const std::string& text_or_copy, bool copy) {
    const std::string tmp = program + ".new";
    if (copy) {
      fs::copy_file(text_or_copy, tmp, fs::copy_options::overwrite_existing);
    } else {
      std::ofstream(tmp) << text_or_copy;
      fs::permissions(tmp, fs::perms::owner_all);
    }
    fs::rename(tmp, program);
  };
  install("#!/bin/sh\necho 'unetbackd: this build is broken' >&2\nexit 1\n", false);
  (void)store_.messages();
  const RunResult bad = w().ctl({"upgrade"});
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("the upgrade failed"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("exited with status 1"), std::string::npos) << bad.err;
  EXPECT_FALSE(w().daemon().wait_exit(0ms).has_value()) << "the daemon serves on";
  EXPECT_NE(w().ctl({"--json", "status"}).out.find("\"upgrade_error\""), std::string::npos);
  EXPECT_TRUE(ping(g1->ns, w().host_ip(), 2));
  const std::string after_bad = store_.messages();
  EXPECT_NE(after_bad.find("RELOADING=1"), std::string::npos) << after_bad;
  EXPECT_NE(after_bad.find("READY=1", after_bad.find("RELOADING=1")), std::string::npos)
      << "ready again after the failed upgrade\n"
      << after_bad;
  EXPECT_EQ(after_bad.find("MAINPID="), std::string::npos) << after_bad;

  // The real binary again: this time the successor takes over.
  install(built, true);
  const RunResult good = w().ctl({"upgrade"});
  ASSERT_EQ(good.status, 0) << good.out << good.err << w().daemon().log();
  const auto st = w().daemon().wait_exit(kHangGuard);
  ASSERT_TRUE(st);
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 4) << *st;
  const pid_t successor = static_cast<pid_t>(sum_counter(w().ctl({"--json", "status"}).out, "pid"));
  ASSERT_GT(successor, 0);
  EXPECT_NE(successor, old);
  w().follow_daemon(successor);
  const std::string msgs = store_.messages();
  EXPECT_NE(msgs.find("MAINPID=" + std::to_string(successor)), std::string::npos) << msgs;
  EXPECT_EQ(msgs.find("STOPPING=1"), std::string::npos) << "the unit does not stop\n" << msgs;
  EXPECT_NE(msgs.find("READY=1", msgs.find("MAINPID=")), std::string::npos)
      << "the successor is ready after it became the main process\n"
      << msgs;
  EXPECT_EQ(adopted(*g1), "taken_over");
  EXPECT_TRUE(ping(g1->ns, w().host_ip(), 2));
}

}  // namespace
}  // namespace unetback::testing
