// Debian's own hotplug scripts under unetbackd (suite e2e, root): vif-bridge, vif-route and
// vif-openvswitch from the xen-utils-common package, run by unetback-xl with libxl's arguments
// and environment, exactly as `xl create` runs them on real Xen. The package is fetched with
// `apt-get download` and unpacked with dpkg-deb into this test's temporary directory (the
// scripts find their helpers through `dirname $0`); nothing of it is installed or committed.
// OVS comes from Debian's openvswitch-switch, its ovsdb-server and ovs-vswitchd run privately
// in dom0's namespace with their own database and run directory, ended by PID.
//
// And what a careless `vifname=` must never do (issue 15, finding 6): name a device that exists
// (the bridge, lo, another vif's TAP) and have that device taken down or out of its bridge.
#include <filesystem>
#include <functional>
#include <gtest/gtest.h>
#include <iostream>
#include <regex>

#include "tests/root/e2e/e2e_fixture.hpp"

namespace unetback::testing {
namespace {

using namespace std::chrono_literals;

/// apt's messages when the archive cannot be reached (as opposed to a package it does not know).
bool apt_unreachable(const std::string& err) {
  for (const char* s :
       {"Temporary failure resolving", "Could not resolve", "Failed to fetch", "Unable to connect",
        "Could not connect", "Network is unreachable", "Connection timed out"})
    if (err.find(s) != std::string::npos) return true;
  return false;
}

class StockScripts : public EndToEnd {
 protected:
  std::string tag() const override { return "ubst"; }
  std::string subnet() const override { return "10.95.0"; }

  void SetUp() override {
    EndToEnd::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string pkg = w().dir() + "/pkg";
    std::filesystem::create_directories(pkg);
    const RunResult dl = testing::run(
        {"sh", "-c", "cd '" + pkg + "' && apt-get download xen-utils-common"}, w().dir(), 120s);
    if (dl.status != 0) {
      if (apt_unreachable(dl.err)) {
        GTEST_SKIP() << "apt is unreachable, cannot fetch xen-utils-common (the stock scripts): "
                     << dl.err;
      }
      FAIL() << "apt-get download xen-utils-common failed: " << dl.err;
    }
    const RunResult x = testing::run(
        {"sh", "-c", "dpkg-deb -x '" + pkg + "'/xen-utils-common_*.deb '" + pkg + "/root'"},
        w().dir());
    ASSERT_EQ(x.status, 0) << x.err;
    scripts_ = pkg + "/root/etc/xen/scripts";
    ASSERT_EQ(::access((scripts_ + "/vif-bridge").c_str(), X_OK), 0) << scripts_;
    // xen-hotplug-common.sh starts with `exec 2>>/var/log/xen/xen-hotplug.log` under set -e:
    // the directory the package would have made at install.
    std::filesystem::create_directories("/var/log/xen");
  }

  [[nodiscard]] std::string script(const std::string& name) const { return scripts_ + "/" + name; }

  [[nodiscard]] std::string link(const std::string& dev) {
    return w().in_ns(w().ns0(), {"ip", "-d", "-o", "link", "show", "dev", dev}).out;
  }
  /// IFF_UP in the link's flags (lo's operstate is UNKNOWN, not UP).
  [[nodiscard]] bool is_up(const std::string& dev) {
    return std::regex_search(link(dev), std::regex("[<,]UP[,>]"));
  }
  [[nodiscard]] std::string backend(const XlWorld::Guest& g) const {
    return "/local/domain/0/backend/vif/" + std::to_string(g.domid) + "/0";
  }
  [[nodiscard]] std::string xs_read(const std::string& path) {
    RunResult r = testing::run(
        {"env", "XENSTORED_PATH=" + w().world() + "/dom0.sock", "xenstore-read", path}, w().dir());
    if (r.status != 0) return "<missing>";
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  }
  [[nodiscard]] std::string hotplug_log() const {
    return testing::slurp("/var/log/xen/xen-hotplug.log");
  }

  /// Ping both ways and iperf3 moving 16 MiB each way (-P 8 for several queues): every byte
  /// arrives. The rates are figures `<figure>_guest_to_host_bps` / `_host_to_guest_bps`.
  void traffic(const XlWorld::Guest& g, int port, const std::string& figure, int streams = 1) {
    EXPECT_TRUE(ping(g.ns, w().host_ip())) << g.name << " cannot ping the host";
    EXPECT_TRUE(ping(w().ns0(), g.ip, 2)) << "the host cannot ping " << g.name;
    const std::vector<std::string> p = {"-P", std::to_string(streams)};
    for (const bool reverse : {false, true}) {
      const RunResult r = iperf_bytes(g, port, "16M", reverse, p);
      ASSERT_EQ(r.status, 0) << r.out << r.err;
      testing::expect_transfer(r.out, 16.0 * 1024 * 1024);
      test::report_figure(figure + (reverse ? "_host_to_guest_bps" : "_guest_to_host_bps"),
                          testing::iperf_bits_per_second(r.out), "bit/s");
    }
  }

  /// Guest TX and guest RX packets per queue of the vif of domain `domid`.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> per_queue(int domid) {
    const std::string s = w().ctl({"--json", "stats", std::to_string(domid) + "/0"}).out;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    const auto tx = queue_counters(s, "tx_packets");
    const auto rx = queue_counters(s, "rx_packets");
    for (std::size_t q = 0; q < tx.size() && q < rx.size(); ++q) out.emplace_back(tx[q], rx[q]);
    return out;
  }

  /// The scenario every stock script gets: a guest with vifname= and one queue, one with
  /// vifname= and two queues, one without vifname; traffic on each; destroy; nothing left.
  /// `on_link` checks what the script did to the (renamed) TAP. The rates are figures named
  /// stock_<script>_<one|two>_queue(s)_...
  void vifname_one_and_two_queues(const std::string& script_name, const std::string& bridge,
                                  const std::string& extra_for_guest,
                                  const std::function<void(const std::string&)>& on_link) {
    serve_iperf(5201);
    std::vector<XlWorld::Guest> guests;
    struct Plan {
      int n;
      std::string vifname;
      int queues;
    };
    for (const Plan& p : {Plan{1, "web1", 1}, Plan{2, "web2", 2}, Plan{3, "", 1}}) {
      std::string extra = p.vifname.empty() ? "" : ",vifname=" + p.vifname;
      extra += extra_for_guest.empty()
                   ? ""
                   : std::regex_replace(extra_for_guest, std::regex("GUESTIP"),
                                        subnet() + "." + std::to_string(10 + p.n));
      auto g = w().create_guest(p.n, {}, {"--queues", std::to_string(p.queues)}, bridge,
                                script(script_name), extra);
      ASSERT_TRUE(g) << w().why() << "\nhotplug log:\n" << hotplug_log();
      const std::string dev = p.vifname.empty() ? g->tap() : p.vifname;
      const std::string l = link(dev);
      ASSERT_FALSE(l.empty()) << dev << " does not exist";
      // The TAP is the one unetbackd made for this vif (its mark survived the rename).
      EXPECT_NE(l.find("alias unetbackd " + backend(*g)), std::string::npos) << l;
      on_link(l);
      // Renamed by the script: nothing under the old name, and no stray TAP made by a queue
      // attached by name after the rename.
      if (!p.vifname.empty()) {
        EXPECT_FALSE(w().link_exists(w().ns0(), g->tap())) << g->tap();
      }
      guests.push_back(*g);
    }
    EXPECT_EQ(w().vif_links(), std::vector<std::string>{guests[2].tap()});
    const std::string figure = "stock_" + std::regex_replace(script_name, std::regex("-"), "_");
    traffic(guests[0], 5201, figure + "_one_queue");
    traffic(guests[1], 5201, figure + "_two_queues", 8);
    // Both queues of the renamed 2-queue vif carried traffic each way: their TAP fds were
    // opened when the TAP was made, before the rename. (Each side's kernel puts a flow on a
    // queue by its hash, seeded at random: with 8 streams and their ACKs each way, all on one
    // queue is a chance of about 2 in 2^17.)
    const auto q = per_queue(guests[1].domid);
    ASSERT_EQ(q.size(), 2U);
    for (const auto& [tx, rx] : q) {
      EXPECT_GT(tx, 0U);
      EXPECT_GT(rx, 0U);
    }
    EXPECT_TRUE(ping(guests[2].ns, w().host_ip()));
    for (const auto& g : guests) {
      const RunResult d = w().destroy_guest(g);
      EXPECT_EQ(d.status, 0) << d.err;
      EXPECT_EQ(xs_read(backend(g) + "/state"), "<missing>");
    }
    EXPECT_TRUE(wait_vif_count(0)) << list();
    EXPECT_FALSE(w().link_exists(w().ns0(), "web1"));
    EXPECT_FALSE(w().link_exists(w().ns0(), "web2"));
    EXPECT_TRUE(w().vif_links().empty());
  }

  std::string scripts_;
};

TEST_F(StockScripts, VifBridgeRenamesToVifnameWithOneAndTwoQueuesAndTrafficFlows) {
  vifname_one_and_two_queues("vif-bridge", XlWorld::kBridge, "", [](const std::string& l) {
    EXPECT_NE(l.find("master " + std::string(XlWorld::kBridge)), std::string::npos) << l;
    EXPECT_TRUE(std::regex_search(l, std::regex("[<,]UP[,>]"))) << l;  // a TAP's state: UNKNOWN
  });
}

TEST_F(StockScripts, VifRouteRoutesTheGuestsAddressWithVifnameAndGatewaydev) {
  // vif-route: the vif gets the address of $netdev (gatewaydev) as a /32, proxy ARP, and a host
  // route to each address in B:ip. The bridge here only carries the host's address.
  vifname_one_and_two_queues(
      "vif-route", "", ",gatewaydev=" + std::string(XlWorld::kBridge) + ",ip=GUESTIP",
      [&](const std::string& l) {
        EXPECT_EQ(l.find("master"), std::string::npos) << l;
        const std::string dev =
            l.substr(l.find(": ") + 2, l.find(':', l.find(": ") + 2) - l.find(": ") - 2);
        const std::string routes = w().in_ns(w().ns0(), {"ip", "route", "show", "dev", dev}).out;
        EXPECT_NE(routes.find("src " + w().host_ip()), std::string::npos) << routes;
        const std::string addr = w().in_ns(w().ns0(), {"ip", "-o", "addr", "show", "dev", dev}).out;
        EXPECT_NE(addr.find(w().host_ip() + "/32"), std::string::npos) << addr;
      });
}

/// ovsdb-server and ovs-vswitchd of this test only, in dom0's namespace, with their own files.
class StockOpenvswitch : public StockScripts {
 protected:
  void SetUp() override {
    StockScripts::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const char* b : {"ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool"}) {
      if (testing::run({"sh", "-c", std::string("command -v ") + b}, w().dir()).status != 0)
        FAIL() << b << " is missing: install openvswitch-switch (tools/lab.sh deps)";
    }
    rundir_ = w().dir() + "/ovs";
    std::filesystem::create_directories(rundir_);
    // Every OVS tool (the script's ovs-vsctl included) finds the database through this.
    ::setenv("OVS_RUNDIR", rundir_.c_str(), 1);
    ::setenv("OVS_DBDIR", rundir_.c_str(), 1);
    ::setenv("OVS_LOGDIR", rundir_.c_str(), 1);
    const std::string db = rundir_ + "/conf.db";
    ASSERT_EQ(testing::run({"ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"},
                           w().dir())
                  .status,
              0);
    Daemon& dbs = w().spawn_in_ns(
        w().ns0(),
        {"ovsdb-server", db, "--remote=punix:" + rundir_ + "/db.sock",
         "--pidfile=" + rundir_ + "/ovsdb-server.pid", "--unixctl=" + rundir_ + "/ovsdb.ctl",
         "--log-file=" + rundir_ + "/ovsdb-server.log"},
        "ovsdb-server.out");
    const auto deadline = std::chrono::steady_clock::now() + testing::kHangGuard;
    while (!std::filesystem::exists(rundir_ + "/db.sock") &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(std::filesystem::exists(rundir_ + "/db.sock")) << dbs.log();
    ASSERT_EQ(vsctl({"--no-wait", "init"}).status, 0);
    Daemon& vsd = w().spawn_in_ns(
        w().ns0(),
        {"ovs-vswitchd", "unix:" + rundir_ + "/db.sock",
         "--pidfile=" + rundir_ + "/ovs-vswitchd.pid", "--unixctl=" + rundir_ + "/vswitchd.ctl",
         "--log-file=" + rundir_ + "/ovs-vswitchd.log"},
        "ovs-vswitchd.out");
    // No openvswitch kernel module needed: the userspace datapath, with TSO so that the
    // guests' GSO frames cross it as they cross a Linux bridge.
    const RunResult br = vsctl({"--timeout=60", "add-br", kOvsBridge, "--", "set", "bridge",
                                kOvsBridge, "datapath_type=netdev", "--", "set", "Open_vSwitch",
                                ".", "other_config:userspace-tso-enable=true"});
    ASSERT_EQ(br.status, 0) << br.err << vsd.log();
    // The host's address moves from the Linux bridge to the OVS bridge's internal port.
    ASSERT_EQ(w().in_ns(w().ns0(), {"ip", "addr", "flush", "dev", XlWorld::kBridge}).status, 0);
    ASSERT_EQ(w().in_ns(w().ns0(), {"ip", "addr", "add", w().host_ip() + "/24", "dev", kOvsBridge})
                  .status,
              0);
    ASSERT_EQ(w().in_ns(w().ns0(), {"ip", "link", "set", kOvsBridge, "up"}).status, 0);
  }
  void TearDown() override {
    StockScripts::TearDown();  // the world's processes (ovs-vswitchd, ovsdb-server) by PID
    ::unsetenv("OVS_RUNDIR");
    ::unsetenv("OVS_DBDIR");
    ::unsetenv("OVS_LOGDIR");
  }
  RunResult vsctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {"ovs-vsctl", "--db=unix:" + rundir_ + "/db.sock"};
    argv.insert(argv.end(), args.begin(), args.end());
    return w().in_ns(w().ns0(), argv, 90s);
  }
  static constexpr const char* kOvsBridge = "ovsbr0";
  std::string rundir_;
};

TEST_F(StockOpenvswitch, VifOpenvswitchAddsThePortWithTheVmsNameAndUuidAndTrafficFlows) {
  vifname_one_and_two_queues("vif-openvswitch", kOvsBridge, "", [&](const std::string& l) {
    const std::string dev =
        l.substr(l.find(": ") + 2, l.find(':', l.find(": ") + 2) - l.find(": ") - 2);
    // libxl's /vm/<uuid> nodes reached the port's external ids (finding 9).
    const RunResult ids = vsctl({"get", "interface", dev, "external-ids"});
    EXPECT_EQ(ids.status, 0) << ids.err;
    EXPECT_TRUE(std::regex_search(ids.out, std::regex("xen-vm-name=\"?g[0-9]"))) << ids.out;
    EXPECT_TRUE(std::regex_search(
        ids.out, std::regex("xen-vm-uuid=\"?[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                            "[0-9a-f]{12}")))
        << ids.out;
    EXPECT_EQ(vsctl({"port-to-br", dev}).out, std::string(kOvsBridge) + "\n");
  });
  // Destroyed: the ports left the OVS bridge with the guests.
  EXPECT_EQ(vsctl({"list-ports", kOvsBridge}).out, "");
}

/// Finding 6: vifname= naming a device that exists. The create fails (as vif-common.sh says:
/// "An interface with name … already exists"), and the device named keeps its state: the bridge
/// stays up, lo stays up, another vif's TAP stays up on its bridge, and that guest's stream
/// never stops (its vif forwards packets across the refused creates, and the stream ends
/// cleanly; its slowest second is a figure). With vif-unetback and with the stock vif-bridge.
TEST_F(StockScripts, VifnameNamingAnExistingDeviceFailsTheCreateAndLeavesThatDeviceAlone) {
  auto g1 = w().create_guest(1);
  ASSERT_TRUE(g1) << w().why();
  serve_iperf(5201);
  const std::uint64_t idle = vif_counter(*g1, "tx_packets");
  Daemon& stream = w().spawn_in_ns(
      g1->ns, {"iperf3", "-c", w().host_ip(), "-p", "5201", "-t", "30", "-i", "1", "-J"},
      "stream.json");
  ASSERT_TRUE(wait_vif_counter_above(*g1, "tx_packets", idle + 1000)) << "the stream never ran";
  const std::uint64_t before_creates = vif_counter(*g1, "tx_packets");
  int attempt = 0;
  for (const std::string& taken : {std::string(XlWorld::kBridge), std::string("lo"), g1->tap()}) {
    for (const std::string& s : {std::string(), script("vif-bridge")}) {
      auto bad = w().create_guest(2, {}, {}, XlWorld::kBridge, s, ",vifname=" + taken);
      ++attempt;
      EXPECT_FALSE(bad) << "vifname=" << taken << " was accepted";
      EXPECT_EQ(w().last_create().status, 3) << w().last_create().err;
      EXPECT_NE(w().last_create().err.find("already exists"), std::string::npos)
          << w().last_create().err;
      for (const std::string& dev : {std::string(XlWorld::kBridge), std::string("lo"), g1->tap()})
        EXPECT_TRUE(is_up(dev)) << "vifname=" << taken << " took " << dev << " down: " << link(dev);
      EXPECT_NE(link(g1->tap()).find("master " + std::string(XlWorld::kBridge)), std::string::npos)
          << "vifname=" << taken << " took " << g1->tap() << " out of the bridge";
    }
  }
  // vif-unetback `offline` for a vif whose vifname names a device that is not its TAP leaves
  // that device alone, whoever runs it.
  ASSERT_EQ(testing::run({"env", "XENSTORED_PATH=" + w().world() + "/dom0.sock", "xenstore-write",
                          backend(*g1) + "/vifname", "lo"},
                         w().dir())
                .status,
            0);
  const RunResult off =
      w().in_ns(w().ns0(), {"env", "XENSTORED_PATH=" + w().world() + "/dom0.sock",
                            "XENBUS_PATH=backend/vif/" + std::to_string(g1->domid) + "/0",
                            "vif=" + g1->tap(), w().bins().script, "offline", "type_if=vif"});
  EXPECT_EQ(off.status, 0) << off.err;
  EXPECT_TRUE(is_up("lo")) << link("lo");
  EXPECT_GT(vif_counter(*g1, "tx_packets"), before_creates)
      << "the good guest's stream stood still across " << attempt << " refused creates";
  const auto st = stream.wait_exit(90s);
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, 0) << stream.log();
  EXPECT_GT(testing::iperf_bytes_received(stream.log()), 0) << stream.log();
  test::report_figure("stock_vifname_refused_stream_slowest_second_bps",
                      testing::lowest(testing::iperf_interval_rates(stream.log())), "bit/s");
}

}  // namespace
}  // namespace unetback::testing
