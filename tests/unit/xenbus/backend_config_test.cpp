// The toolstack's keys: strict rate/mac/mtu/vifname, and a `frontend` that must be exactly the
// vif's frontend directory in the domain named by our own path.
#include "backend/xenbus/backend_config.hpp"

#include <cerrno>
#include <gtest/gtest.h>
#include <map>

#include "common/net/tap_device.hpp"
#include "tests/unit/xenbus/key_map.hpp"

namespace unetback::xenbus {
namespace {

using key_map::Keys;
using key_map::reader;

// What libxl 4.17 writes for `vif = ['bridge=xenbr0,mac=00:16:3e:01:02:03']` of domain 5.
Keys libxl_keys() {
  return {{"frontend", "/local/domain/5/device/vif/0"},
          {"frontend-id", "5"},
          {"online", "1"},
          {"state", "1"},
          {"script", "/etc/xen/scripts/vif-bridge"},
          {"mac", "00:16:3e:01:02:03"},
          {"bridge", "xenbr0"},
          {"handle", "0"},
          {"type", "vif"},
          {"hotplug-status", ""}};
}

TEST(BackendConfig, Paths) {
  EXPECT_EQ(backend_dir_path(DomId{0}, DomId{5}, DevId{1}), "/local/domain/0/backend/vif/5/1");
  EXPECT_EQ(frontend_dir_path(DomId{5}, DevId{1}), "/local/domain/5/device/vif/1");
  EXPECT_EQ(error_node_path(DomId{0}, DomId{5}, DevId{1}),
            "/local/domain/0/error/backend/vif/5/1/error");
}

TEST(BackendConfig, ReadsWhatLibxlWrites) {
  const Keys k = libxl_keys();
  auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r) << r.error().key << ": " << r.error().reason;
  EXPECT_EQ(r->frontend_path, "/local/domain/5/device/vif/0");
  EXPECT_EQ(r->tap_name, "vif5.0");
  EXPECT_EQ(r->mac, (net::MacAddress{{0x00, 0x16, 0x3e, 0x01, 0x02, 0x03}}));
  EXPECT_FALSE(r->mtu.has_value());
}

TEST(BackendConfig, VifnameIsKeptButTheTapIsStillMadeUnderLibxlsName) {
  Keys k = libxl_keys();
  k["vifname"] = "guest-web";
  k["mtu"] = "9000";
  auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r);
  // vif-common.sh renames $vif (vif5.0) to the vifname: the TAP must be made as vif5.0.
  EXPECT_EQ(r->tap_name, "vif5.0");
  EXPECT_EQ(r->vifname, "guest-web");
  EXPECT_EQ(r->mtu, 9000U);
}

TEST(BackendConfig, BridgeNamingTheInternalSwitchJoinsIt) {
  Keys k = libxl_keys();
  k["bridge"] = "xenbr0";  // a Linux bridge: the hotplug script's business
  auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->switch_name.empty());
  k["bridge"] = "unetback:lab-1.a";
  r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->switch_name, "lab-1.a");
  for (const char* bad : {"unetback:", "unetback:a b", "unetback:../x", "unetback:a/b",
                          "unetback:0123456789012345678901234567890123"}) {
    k["bridge"] = bad;
    r = parse_backend_config(reader(k), DomId{5}, DevId{0});
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().key, "bridge");
  }
}

TEST(BackendConfig, MacSpoofingIsRefusedUnlessTheToolstackAllowsIt) {
  Keys k = libxl_keys();
  auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->allow_mac_spoofing) << "the switch checks source MACs by default";
  k[std::string(kAllowMacSpoofingKey)] = "1";
  r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->allow_mac_spoofing);
  k[std::string(kAllowMacSpoofingKey)] = "0";
  r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->allow_mac_spoofing);
  k[std::string(kAllowMacSpoofingKey)] = "yes";
  r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().key, kAllowMacSpoofingKey);
}

TEST(BackendConfig, FrontendPointingElsewhereIsRefused) {
  for (const char* bad :
       {"/local/domain/6/device/vif/0", "/local/domain/5/device/vif/1",
        "/local/domain/5/device/vbd/0", "/local/domain/5/device/vif/0/", "/local/domain/0",
        "local/domain/5/device/vif/0", "/local/domain/05/device/vif/0", ""}) {
    Keys k = libxl_keys();
    k["frontend"] = bad;
    auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().key, "frontend");
    EXPECT_EQ(r.error().error, EPERM);
  }
}

TEST(BackendConfig, FrontendIdMustBeTheDomainOfOurPath) {
  Keys k = libxl_keys();
  k["frontend-id"] = "6";
  auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().key, "frontend-id");
  k.erase("frontend-id");
  EXPECT_EQ(parse_backend_config(reader(k), DomId{5}, DevId{0}).error().error, ENOENT);
  k["frontend-id"] = "65536";
  EXPECT_EQ(parse_backend_config(reader(k), DomId{5}, DevId{0}).error().error, EINVAL);
}

TEST(BackendConfig, HandleMustBeTheDevid) {
  Keys k = libxl_keys();
  k["handle"] = "1";
  EXPECT_EQ(parse_backend_config(reader(k), DomId{5}, DevId{0}).error().key, "handle");
}

TEST(BackendConfig, BadVifnameMacMtuAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"vifname", ""},
      {"vifname", "a-name-that-is-16"},
      {"vifname", "a/b"},
      {"vifname", "a b"},
      {"vifname", "a:b"},
      {"vifname", ".."},
      {"vifname", "tab\there"},
      {"mac", "00:16:3e:01:02"},
      {"mac", "00:16:3e:01:02:03:04"},
      {"mac", "00-16-3e-01-02-03"},
      {"mac", "0:16:3e:01:02:033"},
      {"mac", "00:16:3g:01:02:03"},
      {"mtu", "67"},
      {"mtu", "65536"},
      {"mtu", "1500 "},
      {"mtu", "-1500"},
  };
  for (const auto& [key, value] : cases) {
    Keys k = libxl_keys();
    k[key] = value;
    auto r = parse_backend_config(reader(k), DomId{5}, DevId{0});
    ASSERT_FALSE(r) << key << "=\"" << value << '"';
    EXPECT_EQ(r.error().key, key);
  }
}

TEST(BackendConfig, ValidIfnameBoundaries) {
  EXPECT_TRUE(net::valid_ifname("a-name-that-is5"));  // 15 bytes
  EXPECT_TRUE(net::valid_ifname("vif5.0"));
  EXPECT_FALSE(net::valid_ifname("."));
  EXPECT_FALSE(net::valid_ifname(std::string("a\0b", 3)));
}

TEST(BackendConfig, MacAcceptsEitherCase) {
  auto mac = net::parse_mac("AA:bb:Cc:00:ff:FF");
  ASSERT_TRUE(mac.has_value());
  EXPECT_EQ(*mac, (net::MacAddress{{0xaa, 0xbb, 0xcc, 0x00, 0xff, 0xff}}));
}

TEST(BackendConfig, RateIsDecimalCommaDecimalEnd) {
  EXPECT_EQ(parse_rate("1250000,50000"), (Rate{1250000, 50000}));
  EXPECT_EQ(parse_rate("0,0"), (Rate{0, 0}));
  EXPECT_EQ(parse_rate("18446744073709551615,4294967295"),
            (Rate{18446744073709551615ULL, 4294967295ULL}));
  for (const char* bad : {"", ",", "1,", ",1", "1", "1,2,3", "1 ,2", "1, 2", "+1,2", "-1,2", "1,2 ",
                          "0x10,5", "18446744073709551616,1", "10Mb/s@50ms"}) {
    EXPECT_FALSE(parse_rate(bad).has_value()) << '"' << bad << '"';
  }
}

TEST(BackendConfig, RateAbsentIsUnlimitedAndMalformedIsAnError) {
  Keys k;
  auto r = read_rate(reader(k));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->unlimited());
  k["rate"] = "fast";
  auto bad = read_rate(reader(k));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().key, "rate");
}

TEST(BackendConfig, RateOfZeroBytesPerIntervalIsRefusedWithItsReason) {
  // What xl writes for 1Mb/s@1us: Linux takes it and never refills the credit.
  Keys k;
  for (const char* zero : {"0,1", "0,50000", "0,0"}) {
    k["rate"] = zero;
    auto r = read_rate(reader(k));
    ASSERT_FALSE(r) << zero;
    EXPECT_EQ(r.error().key, "rate");
    EXPECT_NE(r.error().reason.find("0 bytes"), std::string::npos) << r.error().reason;
  }
  k["rate"] = "1,1";
  auto one = read_rate(reader(k));
  ASSERT_TRUE(one);
  EXPECT_EQ(*one, (Rate{1, 1}));
}

}  // namespace
}  // namespace unetback::xenbus
