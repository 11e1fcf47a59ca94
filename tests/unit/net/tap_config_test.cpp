// TapDevice checks that run before any syscall: name and configuration validation, and the
// error codes' messages and errno equivalents. (Creating real TAPs: tests/root/net.)
#include <gtest/gtest.h>
#include <string>

#include "common/net/tap_device.hpp"

namespace unetback::net {
namespace {

TEST(TapConfig, InterfaceNamesFollowTheKernelRulesAndRefuseTemplates) {
  EXPECT_TRUE(valid_ifname("vif1.0"));
  EXPECT_TRUE(valid_ifname("vif65535.65535"));     // 14 bytes
  EXPECT_TRUE(valid_ifname("abcdefghijklmno"));    // 15 = IFNAMSIZ - 1
  EXPECT_FALSE(valid_ifname("abcdefghijklmnop"));  // 16
  EXPECT_FALSE(valid_ifname(""));
  EXPECT_FALSE(valid_ifname("."));
  EXPECT_FALSE(valid_ifname(".."));
  EXPECT_FALSE(valid_ifname("vif/1"));
  EXPECT_FALSE(valid_ifname("vif:1"));
  EXPECT_FALSE(valid_ifname("vif 1"));
  EXPECT_FALSE(valid_ifname("vif\t1"));
  EXPECT_FALSE(valid_ifname("tap%d"));
  EXPECT_FALSE(valid_ifname(std::string("vi\0f", 4)));
}

TEST(TapConfig, InvalidNameIsRefusedBeforeOpeningTheDevice) {
  TapConfig cfg;
  cfg.name = "this-name-is-too-long";
  auto tap = TapDevice::create(cfg);
  ASSERT_FALSE(tap);
  EXPECT_EQ(tap.error(), TapError::invalid_name);
  EXPECT_EQ(tap.error(), std::errc::invalid_argument);
}

TEST(TapConfig, OffloadsNeedVnetHdrAndTsoNeedsChecksumOffload) {
  TapConfig cfg;
  cfg.name = "vif1.0";
  cfg.vnet_hdr = false;
  cfg.offloads.csum = true;
  EXPECT_EQ(TapDevice::create(cfg).error(), TapError::invalid_config);
  cfg.vnet_hdr = true;
  cfg.offloads = TapOffloads{.csum = false, .tso4 = true, .tso6 = false};
  EXPECT_EQ(TapDevice::create(cfg).error(), TapError::invalid_config);
  cfg.offloads = TapOffloads{.csum = false, .tso4 = false, .tso6 = true};
  EXPECT_EQ(TapDevice::create(cfg).error(), TapError::invalid_config);
}

TEST(TapError, MessagesSayWhatToDoAndCompareEqualToTheirErrno) {
  const std::error_code busy = TapError::name_in_use;
  EXPECT_EQ(busy, std::errc::device_or_resource_busy);
  EXPECT_NE(busy.message().find("already exists"), std::string::npos);
  const std::error_code missing = TapError::tun_missing;
  EXPECT_EQ(missing, std::errc::no_such_file_or_directory);
  EXPECT_NE(missing.message().find("/dev/net/tun"), std::string::npos);
  const std::error_code perm = TapError::permission_denied;
  EXPECT_EQ(perm, std::errc::operation_not_permitted);
  EXPECT_NE(perm.message().find("CAP_NET_ADMIN"), std::string::npos);
}

}  // namespace
}  // namespace unetback::net
