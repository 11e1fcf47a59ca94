// unetback-xl's --vif SPEC (xl's vif syntax) and the environment libxl gives hotplug scripts.
#include "tools/xl/vif_option.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>

#include "tools/xl/hotplug_runner.hpp"

namespace unetback::toolstack {
namespace {

VifSpec ok(std::string_view text, DevId devid = DevId{0}) {
  auto r = parse_vif_option(text, devid);
  if (auto* e = std::get_if<VifOptionError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<VifSpec>(r) ? std::get<VifSpec>(r) : VifSpec{};
}

std::string fails(std::string_view text) {
  auto r = parse_vif_option(text, DevId{0});
  EXPECT_TRUE(std::holds_alternative<VifOptionError>(r)) << text;
  return std::holds_alternative<VifOptionError>(r) ? std::get<VifOptionError>(r).message : "";
}

TEST(VifOption, XlStyleSpecFillsLibxlKeys) {
  const VifSpec s =
      ok("mac=00:16:3e:00:00:07,bridge=xenbr0,script=vif-unetback,rate=10Mb/s@50ms,"
         "vifname=guest1,mtu=9000,ip=10.0.0.2",
         DevId{3});
  EXPECT_EQ(s.devid, DevId{3});
  EXPECT_EQ(s.mac, "00:16:3e:00:00:07");
  EXPECT_EQ(s.bridge, "xenbr0");
  EXPECT_EQ(s.script, "vif-unetback");
  EXPECT_EQ(s.rate, "62500,50000");
  EXPECT_EQ(s.vifname, "guest1");
  EXPECT_EQ(s.mtu, 9000U);
  EXPECT_EQ(s.ip, "10.0.0.2");
  EXPECT_TRUE(s.trusted);
}

TEST(VifOption, DefaultsAreLibxls) {
  const VifSpec s = ok("bridge=xenbr0");
  EXPECT_EQ(s.script, "/etc/xen/scripts/vif-bridge");
  EXPECT_FALSE(s.rate);
  EXPECT_FALSE(s.mtu);
  EXPECT_FALSE(s.vifname);
}

TEST(VifOption, RawRateKeepsItsComma) {
  EXPECT_EQ(ok("rate=1000,20000,bridge=br0").rate, "1000,20000");
  EXPECT_EQ(ok("bridge=br0,rate=1000,20000").rate, "1000,20000");
}

TEST(VifOption, DevidAndTrustedOverride) {
  const VifSpec s = ok("devid=5,trusted=0");
  EXPECT_EQ(s.devid, DevId{5});
  EXPECT_FALSE(s.trusted);
}

TEST(VifOption, BadValuesAreRefusedWithTheKeyNamed) {
  EXPECT_NE(fails("mac=00:16:3e:00:00").find("mac"), std::string::npos);
  EXPECT_NE(fails("rate=10Mbit").find("rate"), std::string::npos);
  EXPECT_NE(fails("mtu=67").find("mtu"), std::string::npos);
  EXPECT_NE(fails("mtu=65536").find("mtu"), std::string::npos);
  EXPECT_NE(fails("vifname=a/b").find("vifname"), std::string::npos);
  EXPECT_NE(fails("devid=256").find("devid"), std::string::npos);
  EXPECT_NE(fails("trusted=yes").find("trusted"), std::string::npos);
  EXPECT_NE(fails("model=e1000").find("model"), std::string::npos);
  EXPECT_NE(fails("xenbr0").find("key=value"), std::string::npos);
  EXPECT_NE(fails("script=").find("script"), std::string::npos);
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

}  // namespace
}  // namespace unetback::toolstack
