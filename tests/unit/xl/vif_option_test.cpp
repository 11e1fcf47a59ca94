// unetback-xl's --vif SPEC (xl's vif syntax).
#include "tools/xl/vif_option.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>

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

TEST(VifOption, VifRoutesKeysIpListAndGatewaydev) {
  const VifSpec s = ok("bridge=,ip=10.0.0.2 10.0.1.0/24,gatewaydev=eth1,script=vif-route");
  EXPECT_EQ(s.ip, "10.0.0.2 10.0.1.0/24");
  EXPECT_EQ(s.gatewaydev, "eth1");
  EXPECT_NE(fails("gatewaydev=a b").find("gatewaydev"), std::string::npos);
  EXPECT_NE(fails("gatewaydev=").find("gatewaydev"), std::string::npos);
  EXPECT_NE(fails("ip=").find("ip"), std::string::npos);
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

TEST(VifOption, BackendNamesTheDriverDomainServingTheVif) {
  EXPECT_EQ(ok("bridge=br0").backend, "");  // dom0
  EXPECT_EQ(ok("backend=netdd,bridge=br0").backend, "netdd");
  EXPECT_EQ(ok("backend=3").backend, "3");
  EXPECT_NE(fails("backend=").find("backend"), std::string::npos);
}

TEST(VifOption, BadValuesAreRefusedWithTheKeyNamed) {
  EXPECT_NE(fails("mac=00:16:3e:00:00").find("mac"), std::string::npos);
  EXPECT_NE(fails("rate=10Mbit").find("rate"), std::string::npos);
  EXPECT_NE(fails("rate=1Mb/s@1us").find("0 bytes per interval"), std::string::npos);
  EXPECT_NE(fails("mtu=67").find("mtu"), std::string::npos);
  EXPECT_NE(fails("mtu=65536").find("mtu"), std::string::npos);
  EXPECT_NE(fails("vifname=a/b").find("vifname"), std::string::npos);
  EXPECT_NE(fails("devid=256").find("devid"), std::string::npos);
  EXPECT_NE(fails("trusted=yes").find("trusted"), std::string::npos);
  EXPECT_NE(fails("model=e1000").find("model"), std::string::npos);
  EXPECT_NE(fails("xenbr0").find("key=value"), std::string::npos);
  EXPECT_NE(fails("script=").find("script"), std::string::npos);
}

}  // namespace
}  // namespace unetback::toolstack
