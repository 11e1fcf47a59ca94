// How libxl runs a vif hotplug script (libxl_linux.c, libxl_device.c): argv, environment,
// exit status, the 40 s limit, and the non-blocking form unetbackd uses after a restart.
#include "common/hotplug/hotplug_script.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>

namespace unetback::hotplug {
namespace {

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
                              std::chrono::seconds(10));
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->kind, HotplugOutcome::Kind::exited);
  EXPECT_EQ(r->code, 3);
  EXPECT_FALSE(r->ok());
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "online type_if=vif backend/vif/4/0 vif4.0 /w/dom0.sock\n");
}

TEST(HotplugRunner, ScriptRunningOverItsLimitIsKilled) {
  ScriptDir d;
  ASSERT_FALSE(d.dir().empty());
  const std::string script = d.write("slow", "sleep 30\n");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_hotplug_script({script, "online", DomId{4}, DevId{0}, "", ""},
                              std::chrono::milliseconds(200));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, HotplugOutcome::Kind::timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(HotplugRunner, MissingScriptIsAnError) {
  auto r = run_hotplug_script({"/nonexistent/vif-x", "online", DomId{4}, DevId{0}, "", ""},
                              std::chrono::seconds(1));
  EXPECT_FALSE(r.has_value());
}

TEST(HotplugRunner, PollDoesNotBlockWhileTheScriptRuns) {
  ScriptDir d;
  ASSERT_FALSE(d.dir().empty());
  const std::string script = d.write("s", "sleep 0.3\nexit 0\n");
  auto p = HotplugProcess::spawn({script, "online", DomId{4}, DevId{0}, "", ""},
                                 std::chrono::seconds(10));
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p->poll().has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  std::optional<HotplugOutcome> o;
  for (int i = 0; i < 500 && !o; ++i) {
    o = p->poll();
    if (!o) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
    for (int i = 0; i < 300 && child <= 0; ++i) {
      std::ifstream in(pidfile);
      in >> child;
      if (child <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(child, 0);
  }
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    // Gone, or a zombie waiting for whoever inherited it.
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid_s, comm, state;
    gone = !(stat >> pid_s >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the script's background child survived";
}

}  // namespace
}  // namespace unetback::hotplug
