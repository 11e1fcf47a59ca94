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

VifSpec vif_of(std::string_view text, DevId devid = DevId{0}) {
  auto r = parse_vif_option(text, devid);
  if (auto* e = std::get_if<VifOptionError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<VifSpec>(r) ? std::get<VifSpec>(r) : VifSpec{};
}

std::string vif_error_of(std::string_view text) {
  auto r = parse_vif_option(text, DevId{0});
  EXPECT_TRUE(std::holds_alternative<VifOptionError>(r)) << text;
  return std::holds_alternative<VifOptionError>(r) ? std::get<VifOptionError>(r).message : "";
}

TEST(VifOption, XlStyleSpecFillsLibxlKeys) {
  const VifSpec s = vif_of(
      "mac=00:16:3e:00:00:07,bridge=xenbr0,script=vif-unetback,rate=10Mb/s@50ms,"
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
  const VifSpec s = vif_of("bridge=,ip=10.0.0.2 10.0.1.0/24,gatewaydev=eth1,script=vif-route");
  EXPECT_EQ(s.ip, "10.0.0.2 10.0.1.0/24");
  EXPECT_EQ(s.gatewaydev, "eth1");
  EXPECT_NE(vif_error_of("gatewaydev=a b").find("gatewaydev"), std::string::npos);
  EXPECT_NE(vif_error_of("gatewaydev=").find("gatewaydev"), std::string::npos);
  EXPECT_NE(vif_error_of("ip=").find("ip"), std::string::npos);
}

TEST(VifOption, DefaultsAreLibxls) {
  const VifSpec s = vif_of("bridge=xenbr0");
  EXPECT_EQ(s.script, "/etc/xen/scripts/vif-bridge");
  EXPECT_FALSE(s.rate);
  EXPECT_FALSE(s.mtu);
  EXPECT_FALSE(s.vifname);
}

TEST(VifOption, RawRateKeepsItsComma) {
  EXPECT_EQ(vif_of("rate=1000,20000,bridge=br0").rate, "1000,20000");
  EXPECT_EQ(vif_of("bridge=br0,rate=1000,20000").rate, "1000,20000");
}

TEST(VifOption, DevidAndTrustedOverride) {
  const VifSpec s = vif_of("devid=5,trusted=0");
  EXPECT_EQ(s.devid, DevId{5});
  EXPECT_FALSE(s.trusted);
}

TEST(VifOption, BackendNamesTheDriverDomainServingTheVif) {
  EXPECT_EQ(vif_of("bridge=br0").backend, "");  // dom0
  EXPECT_EQ(vif_of("backend=netdd,bridge=br0").backend, "netdd");
  EXPECT_EQ(vif_of("backend=3").backend, "3");
  EXPECT_NE(vif_error_of("backend=").find("backend"), std::string::npos);
}

TEST(VifOption, BadValuesAreRefusedWithTheKeyNamed) {
  EXPECT_NE(vif_error_of("mac=00:16:3e:00:00").find("mac"), std::string::npos);
  EXPECT_NE(vif_error_of("rate=10Mbit").find("rate"), std::string::npos);
  EXPECT_NE(vif_error_of("rate=1Mb/s@1us").find("0 bytes per interval"), std::string::npos);
  EXPECT_NE(vif_error_of("mtu=67").find("mtu"), std::string::npos);
  EXPECT_NE(vif_error_of("mtu=65536").find("mtu"), std::string::npos);
  EXPECT_NE(vif_error_of("vifname=a/b").find("vifname"), std::string::npos);
  EXPECT_NE(vif_error_of("devid=256").find("devid"), std::string::npos);
  EXPECT_NE(vif_error_of("trusted=yes").find("trusted"), std::string::npos);
  EXPECT_NE(vif_error_of("model=e1000").find("model"), std::string::npos);
  EXPECT_NE(vif_error_of("xenbr0").find("key=value"), std::string::npos);
  EXPECT_NE(vif_error_of("script=").find("script"), std::string::npos);
}

}  // namespace
}  // namespace unetback::toolstack
