// unetbackd's refusal to run beside the kernel netback, against a sysfs tree made in a
// temporary directory (no root, no Xen).
#include "backend/daemon/kernel_netback.hpp"

#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

#include "backend/daemon/daemon_options.hpp"

namespace unetback::daemon {
namespace {

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/unetback-sysfs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    std::filesystem::create_directories(root_ + "/module/xen_blkback");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void load_netback() { std::filesystem::create_directories(root_ + "/module/xen_netback"); }
  std::string root_;
};

TEST_F(FakeSysfs, NoXenNetbackModuleNoConflict) {
  EXPECT_FALSE(kernel_netback_loaded(root_));
  EXPECT_EQ(kernel_netback_conflict(hv::XenSpec{}, false, root_), std::nullopt);
}

TEST_F(FakeSysfs, LoadedXenNetbackRefusesXenWithAClearReason) {
  load_netback();
  EXPECT_TRUE(kernel_netback_loaded(root_));
  const auto why = kernel_netback_conflict(hv::XenSpec{}, false, root_);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("kernel netback is loaded"), std::string::npos) << *why;
  EXPECT_NE(why->find(root_ + "/module/xen_netback"), std::string::npos) << *why;
  EXPECT_NE(why->find("--allow-kernel-netback"), std::string::npos) << *why;
  EXPECT_NE(why->find("/etc/modprobe.d/unetback.conf"), std::string::npos) << *why;
}

TEST_F(FakeSysfs, OverrideFlagOrAXensimWorldStartsAnyway) {
  load_netback();
  EXPECT_EQ(kernel_netback_conflict(hv::XenSpec{}, true, root_), std::nullopt);
  EXPECT_EQ(kernel_netback_conflict(hv::SimSpec{"/tmp/world"}, false, root_), std::nullopt);
}

TEST_F(FakeSysfs, AFileNamedXenNetbackIsNoModule) {
  std::filesystem::create_directories(root_ + "/module");
  {
    std::FILE* f = std::fopen((root_ + "/module/xen_netback").c_str(), "w");
    std::fclose(f);
  }
  EXPECT_FALSE(kernel_netback_loaded(root_));
}

TEST(KernelNetback, SysfsRootComesFromTheEnvironmentForTests) {
  ::unsetenv("UNETBACK_SYSFS_ROOT");
  EXPECT_EQ(sysfs_root(), "/sys");
  ::setenv("UNETBACK_SYSFS_ROOT", "/tmp/x", 1);
  EXPECT_EQ(sysfs_root(), "/tmp/x");
  ::setenv("UNETBACK_SYSFS_ROOT", "", 1);
  EXPECT_EQ(sysfs_root(), "/sys");
  ::unsetenv("UNETBACK_SYSFS_ROOT");
}

TEST(KernelNetback, AllowFlagIsParsedAndTakesNoValue) {
  std::vector<std::string_view> args{"--allow-kernel-netback", "--hypervisor", "xen"};
  auto r = parse_daemon_args(args);
  ASSERT_TRUE(std::holds_alternative<DaemonOptions>(r)) << std::get<std::string>(r);
  EXPECT_TRUE(std::get<DaemonOptions>(r).allow_kernel_netback);
  std::vector<std::string_view> plain{"--hypervisor", "xen"};
  EXPECT_FALSE(std::get<DaemonOptions>(parse_daemon_args(plain)).allow_kernel_netback);
}

}  // namespace
}  // namespace unetback::daemon
