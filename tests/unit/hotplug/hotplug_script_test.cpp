// How libxl runs a vif hotplug script (libxl_linux.c, libxl_device.c): argv, environment,
// exit status, the 40 s limit, and the non-blocking form unetbackd uses after a restart.
#include "common/hotplug/hotplug_script.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>

namespace unetback::hotplug {
namespace {

using namespace std::chrono_literals;

// How long a wait for something that must happen may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr auto kHangGuard = 30s;

/// Calls `done` every 10 ms until it holds or kHangGuard has passed; whether it held.
template <typename F>
bool wait_until(F done) {
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

/// Whether process `pid` is gone, or a zombie waiting for whoever inherited it.
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  return !(stat >> pid_s >> comm >> state) || state == "Z";
}

TEST(HotplugRunner, EnvironmentIsLibxlsPlusXenstoredPath) {
  const HotplugCall call{"/s/vif-unetback", "online", DomId{7}, DevId{1}, "", "/w/dom0.sock"};
  const std::vector<std::string> want = {
      "script=/s/vif-unetback",      "XENBUS_TYPE=vif", "XENBUS_PATH=backend/vif/7/1",
      "XENBUS_BASE_PATH=backend",    "netdev=",         "vif=vif7.1",
      "XENSTORED_PATH=/w/dom0.sock",
  };
  EXPECT_EQ(hotplug_environment(call), want);
  EXPECT_EQ(hotplug_argv(call),
            (std::vector<std::string>{"/s/vif-unetback", "online", "type_if=vif"}));
}

TEST(HotplugRunner, RelativeScriptNamesResolveLikeLibxl) {
  EXPECT_EQ(resolve_script_path("vif-bridge"), "/etc/xen/scripts/vif-bridge");
  EXPECT_EQ(resolve_script_path("/opt/x"), "/opt/x");
  const std::string rel = resolve_script_path("tools/hotplug/vif-unetback");
  EXPECT_TRUE(rel.starts_with('/'));
  EXPECT_TRUE(rel.ends_with("/tools/hotplug/vif-unetback"));
}

/// A script in a fresh temp dir, removed at the end.
class ScriptDir {
 public:
  ScriptDir() {
    char tmpl[] = "/tmp/unetback-xl-test.XXXXXX";
    dir_ = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~ScriptDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScriptDir(const ScriptDir&) = delete;
  ScriptDir& operator=(const ScriptDir&) = delete;
  std::string write(const std::string& name, const std::string& body) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    ::chmod(p.c_str(), 0755);
    return p;
  }
  [[nodiscard]] const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(HotplugRunner, ScriptSeesArgumentsAndEnvironmentAndItsStatusIsReported) {
  ScriptDir d;
  ASSERT_FALSE(d.dir().empty());
  const std::string out = d.dir() + "/out";
  const std::string script =
      d.write("s", "echo \"$1 $2 $XENBUS_PATH $vif $XENSTORED_PATH\" > " + out + "\nexit 3\n");
  auto r = run_hotplug_script({script, "online", DomId{4}, DevId{0}, "", "/w/dom0.sock"},
                              std::chrono::seconds(60));
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->kind, HotplugOutcome::Kind::exited);
  EXPECT_EQ(r->code, 3);
  EXPECT_FALSE(r->ok());
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "online type_if=vif backend/vif/4/0 vif4.0 /w/dom0.sock\n");
}

// The script would sleep for ten minutes: a runner that waited for it would not come back
// in the test's time. It is killed at its limit, reported timed out, and not before the limit.
TEST(HotplugRunner, ScriptRunningOverItsLimitIsKilled) {
  ScriptDir d;
  ASSERT_FALSE(d.dir().empty());
  const std::string pidfile = d.dir() + "/pid";
  const std::string script = d.write("slow", "echo $$ > " + pidfile + "\nexec sleep 600\n");
  constexpr auto kLimit = 200ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_hotplug_script({script, "online", DomId{4}, DevId{0}, "", ""}, kLimit);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, HotplugOutcome::Kind::timed_out);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, kLimit) << "killed before its limit";
  pid_t pid = -1;
  std::ifstream(pidfile) >> pid;
  if (pid > 0) {
    EXPECT_TRUE(wait_until([&] { return gone(pid); })) << "the script still runs";
  }
}

TEST(HotplugRunner, MissingScriptIsAnError) {
  auto r = run_hotplug_script({"/nonexistent/vif-x", "online", DomId{4}, DevId{0}, "", ""},
                              std::chrono::seconds(60));
  EXPECT_FALSE(r.has_value());
}

// The script runs until the test lets it end (a file appears): a poll() that waited for the
// script would never return, so a poll() that answers "still running" did not block.
TEST(HotplugRunner, PollDoesNotBlockWhileTheScriptRuns) {
  ScriptDir d;
  ASSERT_FALSE(d.dir().empty());
  const std::string go = d.dir() + "/go";
  const std::string script =
      d.write("s", "while [ ! -e " + go + " ]; do sleep 0.01; done\nexit 0\n");
  auto p = HotplugProcess::spawn({script, "online", DomId{4}, DevId{0}, "", ""}, 60s);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  auto first = std::async(std::launch::async, [&] { return p->poll(); });
  const bool answered = first.wait_for(kHangGuard) == std::future_status::ready;
  std::ofstream(go) << "";  // the script may end now (and a blocked poll() return)
  ASSERT_TRUE(answered) << "poll() waited for the script";
  EXPECT_FALSE(first.get().has_value()) << "the script cannot have ended yet";
  std::optional<HotplugOutcome> o;
  EXPECT_TRUE(wait_until([&] { return (o = p->poll()).has_value(); }));
  ASSERT_TRUE(o.has_value());
  EXPECT_TRUE(o->ok()) << o->describe();
  EXPECT_FALSE(p->poll().has_value()) << "the outcome is reported once";
}

TEST(HotplugRunner, DroppingARunningScriptKillsItsProcessGroup) {
  ScriptDir d;
  ASSERT_FALSE(d.dir().empty());
  const std::string pidfile = d.dir() + "/child";
  // The script's own child (a sleep in the background) must die with it.
  const std::string script = d.write("s", "sleep 30 &\necho $! > " + pidfile + "\nwait\n");
  pid_t child = -1;
  {
    auto p = HotplugProcess::spawn({script, "online", DomId{4}, DevId{0}, "", ""},
                                   std::chrono::seconds(60));
    ASSERT_TRUE(p.has_value());
    (void)wait_until([&] {
      std::ifstream in(pidfile);
      in >> child;
      return child > 0;
    });
    ASSERT_GT(child, 0);
  }
  EXPECT_TRUE(wait_until([&] { return gone(child); })) << "the script's background child survived";
}

}  // namespace
}  // namespace unetback::hotplug
