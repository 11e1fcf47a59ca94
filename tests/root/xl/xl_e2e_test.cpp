// unetback-xl end to end, as the README's demo uses it: a real xensim, the real unetbackd in
// a network namespace with a Linux bridge, unetback-xl (in that namespace, so the hotplug
// script vif-unetback bridges the TAP there) and the real netfront-shim as the guest in a
// namespace of its own. Checks libxl's contract: create -> backend Connected (4) and the guest
// answers ping through the bridge; destroy -> Closed (6) within libxl's limit (unetback-xl
// warns when it gives up waiting), TAP and xenstore dirs gone, guest stopped; a failing hotplug
// script fails the create (exit 3) and leaves nothing behind. How long the destroy took is a
// figure. Every wait is for a condition, with a 30 s guard against a hang. Needs root: suite
// root-netns.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/hv/hypervisor_spec.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/support/figure.hpp"
#include "tests/support/xenbus_state.hpp"
#include "tests/support/xl_world.hpp"
#include "tools/xl/toolstack.hpp"

extern char** environ;

namespace unetback {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// How long a wait for a condition may take before the test calls it a hang.
constexpr std::chrono::seconds kHangGuard{30};

/// Polls `done` every 50 ms until it holds or kHangGuard passes; its last value.
template <typename F>
bool eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  return done();
}

using testing::Daemon;
using testing::env_or;
using testing::run;
using testing::RunResult;
using testing::slurp;

class XlEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, TAPs)";
    for (const auto& b : {xensim_, unetbackd_, xl_, shim_, script_})
      if (::access(b.c_str(), X_OK) != 0) GTEST_SKIP() << b << " is not there";
    char tmpl[] = "/tmp/unetback-xl-e2e.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string tag = std::to_string(::getpid());
    ns0_ = "ubxl-d" + tag;
    nsg_ = "ubxl-g" + tag;
    for (const auto& ns : {ns0_, nsg_}) {
      ASSERT_EQ(run({"ip", "netns", "add", ns}, dir_).status, 0);
      namespaces_.push_back(ns);
      ASSERT_EQ(run({"ip", "-n", ns, "link", "set", "lo", "up"}, dir_).status, 0);
    }
    ASSERT_EQ(run({"ip", "-n", ns0_, "link", "add", "xlbr0", "type", "bridge"}, dir_).status, 0);
    ASSERT_EQ(run({"ip", "-n", ns0_, "addr", "add", "10.98.0.1/24", "dev", "xlbr0"}, dir_).status,
              0);
    ASSERT_EQ(run({"ip", "-n", ns0_, "link", "set", "xlbr0", "up"}, dir_).status, 0);

    xensim_proc_ = std::make_unique<Daemon>(
        std::vector<std::string>{xensim_, "--dir", dir_ + "/world"}, dir_ + "/xensim.log");
    ASSERT_TRUE(xensim_proc_->wait_for("xensim ready", kHangGuard)) << xensim_proc_->log();
    daemon_ = std::make_unique<Daemon>(
        std::vector<std::string>{"ip", "netns", "exec", ns0_, unetbackd_, "--hypervisor",
                                 hv::format_sim_spec(world())},
        dir_ + "/unetbackd.log");
    ASSERT_TRUE(eventually([&] { return fs::exists(world() + "/unetbackd.sock"); }))
        << daemon_->log();
    hv_ = std::make_unique<hv::SimHypervisor>(world(), hv::HypervisorOptions{});
    xs_ = hv_->open_xenstore();
  }

  void TearDown() override {
    xs_.reset();
    hv_.reset();
    // Any guest left running (a failed test): its pid file names it.
    if (!dir_.empty()) {
      for (const auto& e : fs::directory_iterator(world(), ec_)) {
        if (e.path().filename().string().starts_with("guest-") && e.path().extension() == ".pid") {
          const pid_t pid = std::atoi(slurp(e.path()).c_str());
          if (pid > 0 && slurp("/proc/" + std::to_string(pid) + "/cmdline").find("netfront-shim") !=
                             std::string::npos)
            ::kill(pid, SIGKILL);
        }
      }
    }
    daemon_.reset();
    xensim_proc_.reset();
    for (const auto& ns : namespaces_) (void)run({"ip", "netns", "del", ns}, dir_);
    if (!dir_.empty()) fs::remove_all(dir_, ec_);
  }

  [[nodiscard]] std::string world() const { return dir_ + "/world"; }
  RunResult xl(std::vector<std::string> args) {
    std::vector<std::string> argv = {"ip", "netns", "exec", ns0_, xl_, "--world", world()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, dir_, 90s);
  }
  bool link_exists(const std::string& ns, const std::string& dev) {
    return run({"ip", "-n", ns, "link", "show", "dev", dev}, dir_).status == 0;
  }

  std::string xensim_ = env_or("XENSIM_BIN", XENSIM_BIN_DEFAULT);
  std::string unetbackd_ = env_or("UNETBACKD_BIN", UNETBACKD_BIN_DEFAULT);
  std::string xl_ = env_or("UNETBACK_XL_BIN", UNETBACK_XL_BIN_DEFAULT);
  std::string shim_ = env_or("NETFRONT_SHIM_BIN", NETFRONT_SHIM_BIN_DEFAULT);
  std::string script_ = env_or("VIF_UNETBACK_SCRIPT", VIF_UNETBACK_SCRIPT_DEFAULT);
  std::string dir_, ns0_, nsg_;
  std::vector<std::string> namespaces_;
  std::unique_ptr<Daemon> xensim_proc_, daemon_;
  std::unique_ptr<hv::SimHypervisor> hv_;
  std::unique_ptr<hv::XenStore> xs_;
  std::error_code ec_;
};

TEST_F(XlEndToEnd, CreateConnectsTheVifAndTheGuestAnswersPingThenDestroyRemovesEverything) {
  const RunResult c =
      xl({"create", "g1", "--vif", "mac=00:16:3e:00:00:11,bridge=xlbr0,script=" + script_,
          "--guest-netns", nsg_, "--address", "10.98.0.2/24", "--shim", shim_});
  ASSERT_EQ(c.status, 0) << c.err << daemon_->log();
  ASSERT_TRUE(c.out.starts_with("domid ")) << c.out;
  const DomId domid{static_cast<std::uint16_t>(std::atoi(c.out.c_str() + 6))};
  const std::string tap = "vif" + std::to_string(domid.value()) + ".0";
  const std::string be = toolstack::backend_path(DomId{0}, domid, DevId{0});

  // libxl's nodes, the script's work, and the backend's Connected.
  EXPECT_EQ(xs_->read(be + "/hotplug-status").value_or(""), "connected");
  EXPECT_EQ(xs_->read(be + "/bridge").value_or(""), "xlbr0");
  EXPECT_EQ(xs_->read(toolstack::frontend_path(domid, DevId{0}) + "/mtu").value_or(""), "1500");
  // libxl__domain_make's VM nodes (vif-openvswitch reads the name and uuid through them):
  // /vm/<uuid> owned by dom0 and readable by the guest, /local/domain/<D>/vm naming it.
  const std::string vm =
      xs_->read("/local/domain/" + std::to_string(domid.value()) + "/vm").value_or("");
  ASSERT_TRUE(std::regex_match(vm, std::regex("/vm/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-"
                                              "[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << vm;
  EXPECT_EQ(xs_->read(vm + "/uuid").value_or(""), vm.substr(4));
  EXPECT_EQ(xs_->read(vm + "/name").value_or(""), "g1");
  const auto vm_perms = xs_->get_perms(vm);
  ASSERT_TRUE(vm_perms);
  ASSERT_EQ(vm_perms->size(), 2U);
  EXPECT_EQ((*vm_perms)[0].domid, DomId{0});
  EXPECT_EQ((*vm_perms)[0].kind, hv::XsPerm::Kind::none);
  EXPECT_EQ((*vm_perms)[1].domid, domid);
  EXPECT_EQ((*vm_perms)[1].kind, hv::XsPerm::Kind::read);
  // The TAP unetbackd made is marked as this vif's (vif-unetback checks it before offline).
  const RunResult alias = run({"ip", "-n", ns0_, "-d", "-o", "link", "show", "dev", tap}, dir_);
  EXPECT_NE(alias.out.find("alias unetbackd " + be), std::string::npos) << alias.out;
  EXPECT_FALSE(test::wait_for_state(*xs_, be + "/state", test::XenbusState::connected, kHangGuard))
      << xs_->read(be + "/state").value_or("?") << daemon_->log();
  const RunResult master = run({"ip", "-n", ns0_, "-o", "link", "show", "dev", tap}, dir_);
  EXPECT_NE(master.out.find("master xlbr0"), std::string::npos) << master.out;
  EXPECT_NE(master.out.find(",UP"), std::string::npos)
      << master.out;  // admin up (a TAP reports state UNKNOWN)
  EXPECT_TRUE(fs::exists(world() + "/guest-" + std::to_string(domid.value()) + ".pid"));

  const RunResult ping =
      run({"ip", "netns", "exec", nsg_, "ping", "-c", "3", "-i", "0.2", "-w", "30", "10.98.0.1"},
          dir_, 60s);
  EXPECT_EQ(ping.status, 0) << ping.out << ping.err;

  const RunResult l = xl({"list"});
  EXPECT_EQ(l.status, 0) << l.err;
  EXPECT_NE(l.out.find("g1"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("connected"), std::string::npos) << l.out;

  const auto t0 = std::chrono::steady_clock::now();
  const RunResult d = xl({"destroy", "g1"});
  EXPECT_EQ(d.status, 0) << d.err;
  // close_vif saw Closed (6) within LIBXL_DESTROY_TIMEOUT: no timeout warning.
  EXPECT_EQ(d.err.find("did not reach Closed"), std::string::npos) << d.err;
  test::report_figure(
      "xl_destroy_ms",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
      "ms");
  EXPECT_FALSE(xs_->read(be + "/state").has_value());
  EXPECT_FALSE(xs_->read(toolstack::frontend_path(domid, DevId{0}) + "/state").has_value());
  EXPECT_FALSE(xs_->read("/libxl/" + std::to_string(domid.value())).has_value());
  EXPECT_FALSE(xs_->read(vm).has_value());
  EXPECT_FALSE(fs::exists(world() + "/guest-" + std::to_string(domid.value()) + ".pid"));
  // unetbackd deletes the TAP once Closed.
  EXPECT_TRUE(eventually([&] { return !link_exists(ns0_, tap); })) << tap << " still exists";
  EXPECT_TRUE(eventually([&] { return !hv_->domain_exists(domid); }));
  EXPECT_EQ(xl({"destroy", "g1"}).status, 1);  // no such domain any more
}

TEST_F(XlEndToEnd, MissingBridgeFailsTheHotplugScriptAndTheCreateLikeXl) {
  const RunResult c =
      xl({"create", "g2", "--vif", "bridge=nosuchbr,script=" + script_, "--shim", shim_});
  EXPECT_EQ(c.status, 3) << c.out << c.err;
  EXPECT_NE(c.err.find("bridge nosuchbr does not exist"), std::string::npos) << c.err;
  EXPECT_TRUE(c.out.empty()) << c.out;
  // Nothing left: no backend dirs for any domain, the domain destroyed.
  auto vifs = xs_->directory("/local/domain/0/backend/vif");
  EXPECT_TRUE(!vifs || vifs->empty());
  const RunResult l = xl({"list"});
  EXPECT_EQ(l.out.find("g2"), std::string::npos) << l.out;
}

/// A driver domain serves the vif: libxl runs the hotplug script there with XENBUS_PATH relative
/// to that domain's home (backend/vif/<D>/<N>), so vif-unetback must work on
/// /local/domain/<driver>/backend/vif/<D>/<N>, the path unetbackd in the driver domain marks
/// its TAP with, and not on dom0's (it used to take /local/domain/0 for granted: "no bridge
/// given", hotplug-status=error in dom0's tree and the vif never connected).
TEST_F(XlEndToEnd, VifUnetbackInADriverDomainWorksOnThatDomainsBackendPath) {
  auto driver = hv_->create_domain("netdrv");
  ASSERT_TRUE(driver);
  auto guest = hv_->create_domain("guest");
  ASSERT_TRUE(guest);
  const std::string rel = "backend/vif/" + std::to_string(guest->value()) + "/0";
  const std::string home = "/local/domain/" + std::to_string(driver->value());
  const std::string be = home + "/" + rel;
  const std::string tap = "vif" + std::to_string(guest->value()) + ".0";
  // What libxl writes for the backend: its directory, owned by the driver domain.
  ASSERT_FALSE(xs_->write(be + "/bridge", "xlbr0"));
  ASSERT_FALSE(xs_->write(be + "/mtu", "1400"));
  const hv::XsPerm owner[] = {hv::XsPerm{*driver, hv::XsPerm::Kind::none}};
  for (const std::string& p :
       {home + "/backend", home + "/backend/vif",
        home + "/backend/vif/" + std::to_string(guest->value()), be, be + "/bridge", be + "/mtu"})
    ASSERT_FALSE(xs_->set_perms(p, owner)) << p;
  // The TAP as unetbackd in the driver domain makes it: named vif<D>.<N>, marked with its path.
  ASSERT_EQ(run({"ip", "-n", ns0_, "tuntap", "add", "dev", tap, "mode", "tap"}, dir_).status, 0);
  ASSERT_EQ(
      run({"ip", "-n", ns0_, "link", "set", "dev", tap, "alias", "unetbackd " + be}, dir_).status,
      0);

  // libxl's call, in the driver domain: its xenstore connection, XENBUS_PATH relative to it.
  auto hotplug = [&](const std::string& action) {
    return run({"ip", "netns", "exec", ns0_, "env",
                "XENSTORED_PATH=" + world() + "/dom" + std::to_string(driver->value()) + ".sock",
                "XENBUS_PATH=" + rel, "vif=" + tap, script_, action, "type_if=vif"},
               dir_);
  };
  const RunResult on = hotplug("online");
  EXPECT_EQ(on.status, 0) << on.err;
  EXPECT_EQ(xs_->read(be + "/hotplug-status").value_or(""), "connected") << on.err;
  EXPECT_FALSE(xs_->read("/local/domain/0/" + rel + "/hotplug-status").has_value());
  const RunResult l = run({"ip", "-n", ns0_, "-o", "link", "show", "dev", tap}, dir_);
  EXPECT_NE(l.out.find("master xlbr0"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("mtu 1400"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find(",UP"), std::string::npos) << l.out;

  const RunResult off = hotplug("offline");
  EXPECT_EQ(off.status, 0) << off.err;
  const RunResult after = run({"ip", "-n", ns0_, "-o", "link", "show", "dev", tap}, dir_);
  EXPECT_EQ(after.out.find("master xlbr0"), std::string::npos) << after.out;
  EXPECT_EQ(after.out.find(",UP"), std::string::npos) << after.out;
}

/// A save image is a file that anyone who can write it may have edited: restore takes its vifs
/// through the checks create makes of a --vif, so an image with a vif create would refuse is
/// refused with that vif's key named, before any domain, device or hotplug script, and the
/// suspended guest is still restored from the image as it was saved.
TEST_F(XlEndToEnd, RestoreRefusesAnImageWithAVifCreateWouldRefuseAndBuildsNothing) {
  const RunResult c =
      xl({"create", "g5", "--vif", "mac=00:16:3e:00:00:15,bridge=xlbr0,script=" + script_,
          "--guest-netns", nsg_, "--address", "10.98.0.5/24", "--shim", shim_});
  ASSERT_EQ(c.status, 0) << c.err << daemon_->log();
  const std::string image = dir_ + "/g5.save";
  const RunResult s = xl({"save", "g5", image});
  ASSERT_EQ(s.status, 0) << s.err;
  const std::string saved = slurp(image);
  const std::string mac_line = "vif 0 mac 00:16:3e:00:00:15\n";
  ASSERT_NE(saved.find(mac_line), std::string::npos) << saved;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = saved;
    for (auto at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size()))
      t.replace(at, from.size(), to);
    return t;
  };
  const auto script_at = saved.find("vif 0 script /");
  ASSERT_NE(script_at, std::string::npos) << saved;
  const std::string script_line =
      saved.substr(script_at, saved.find('\n', script_at) + 1 - script_at);
  struct Hostile {
    const char* what;
    std::string text;
    const char* says;  // create's words for it
  };
  const Hostile hostile[] = {
      {"a mac that is no MAC", with(mac_line, "vif 0 mac 00:16:3e:zz:00:15\n"),
       "vif 0: mac must be"},
      {"a vifname longer than an interface name", saved + "vif 0 vifname vif-name-far-too-long\n",
       "vif 0: invalid vifname"},
      {"a vifname that is a path", saved + "vif 0 vifname ../../x\n", "vif 0: invalid vifname"},
      {"a gatewaydev with a space", saved + "vif 0 gatewaydev eth0 up\n",
       "vif 0: invalid gatewaydev"},
      {"an empty ip", saved + "vif 0 ip \n", "vif 0: empty ip"},
      {"a rate of 0 bytes per interval", saved + "vif 0 rate 0,50000\n", "vif 0: rate=0,50000"},
      {"a devid create refuses", with("vif 0 ", "vif 300 "), "vif 300: devid must be 0..255"},
      {"an empty script", with(script_line, "vif 0 script \n"), "vif 0: empty script"},
  };
  const std::string bad = dir_ + "/g5-bad.save";
  for (const Hostile& h : hostile) {
    {
      std::ofstream out(bad, std::ios::trunc);
      out << h.text;
      ASSERT_TRUE(out.flush());
    }
    const RunResult r = xl({"restore", bad});
    EXPECT_EQ(r.status, 1) << h.what << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(h.says), std::string::npos) << h.what << ": " << r.err;
    EXPECT_NE(r.err.find("not restored"), std::string::npos) << h.what << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << h.what << ": " << r.out;
    // Nothing was built: no domain named g5, no vif backend, no TAP.
    EXPECT_EQ(xl({"list"}).out.find("g5"), std::string::npos) << h.what;
    const auto vifs = xs_->directory("/local/domain/0/backend/vif");
    EXPECT_TRUE(!vifs || vifs->empty()) << h.what;
  }
  // The image as saved still brings the guest back, connected.
  const RunResult r = xl({"restore", image});
  ASSERT_EQ(r.status, 0) << r.err << daemon_->log();
  ASSERT_TRUE(r.out.starts_with("domid ")) << r.out;
  const DomId domid{static_cast<std::uint16_t>(std::atoi(r.out.c_str() + 6))};
  EXPECT_FALSE(test::wait_for_state(*xs_,
                                    toolstack::backend_path(DomId{0}, domid, DevId{0}) + "/state",
                                    test::XenbusState::connected, kHangGuard))
      << daemon_->log();
  EXPECT_EQ(xl({"destroy", "g5"}).status, 0);
}

TEST_F(XlEndToEnd, UsageErrorsExitTwo) {
  EXPECT_EQ(xl({"create", "g3"}).status, 2);
  EXPECT_EQ(xl({"create", "g3", "--vif", "rate=fast"}).status, 2);
  // A rate that rounds to 0 bytes per interval (real xl writes "0,1" and the vif's TX stops
  // for good): refused, with the reason.
  const RunResult zero = xl({"create", "g3", "--vif", "rate=1Mb/s@1us"});
  EXPECT_EQ(zero.status, 2);
  EXPECT_NE(zero.err.find("0 bytes per interval"), std::string::npos) << zero.err;
  EXPECT_EQ(xl({"create", "g3", "--vif", "rate=1b/s@1us"}).status, 2);
  EXPECT_EQ(xl({"frobnicate"}).status, 2);
}

}  // namespace
}  // namespace unetback
