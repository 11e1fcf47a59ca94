// open_hypervisor(): the one place a main picks real Xen or xensim, and what it says when
// neither is there.
#include <filesystem>
#include <gtest/gtest.h>
#include <string>

#include "common/hv/hypervisor.hpp"

namespace unetback::hv {
namespace {

std::string setup_error_of(std::string_view spec, Role role) {
  HypervisorOptions opts;
  opts.role = role;
  try {
    (void)open_hypervisor(spec, opts);
  } catch (const SetupError& e) {
    return e.what();
  }
  return {};
}

TEST(OpenHypervisor, UnknownSpecNamesBothChoices) {
  const std::string msg = setup_error_of("kvm", Role::backend);
  EXPECT_NE(msg.find("'kvm'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--hypervisor xen"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sim:<world-dir>"), std::string::npos) << msg;
  EXPECT_FALSE(setup_error_of("sim:", Role::backend).empty());
}

TEST(OpenHypervisor, XenWithoutXenNamesTheMissingDeviceAndPointsToXensim) {
  if (std::filesystem::exists("/dev/xen/gntdev")) GTEST_SKIP() << "this machine runs on Xen";
  const std::string backend = setup_error_of("xen", Role::backend);
  EXPECT_NE(backend.find("/dev/xen/gntdev"), std::string::npos) << backend;
  EXPECT_NE(backend.find("sim:"), std::string::npos) << backend;
  const std::string frontend = setup_error_of("xen", Role::frontend);
  EXPECT_NE(frontend.find("/dev/xen/"), std::string::npos) << frontend;
}

TEST(OpenHypervisor, SimWithoutARunningXensimNamesTheBrokerSocket) {
  const std::string msg = setup_error_of("sim:/nonexistent/world", Role::backend);
  EXPECT_NE(msg.find("/nonexistent/world/hv.sock"), std::string::npos) << msg;
}

}  // namespace
}  // namespace unetback::hv
