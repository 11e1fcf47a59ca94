// parse_hypervisor_spec(): the one reader of --hypervisor for unetbackd, netfront-shim and
// open_hypervisor().
#include "common/hv/hypervisor_spec.hpp"

#include <gtest/gtest.h>

namespace unetback::hv {
namespace {

TEST(HypervisorSpec, XenAndASimWorldDirectory) {
  EXPECT_EQ(parse_hypervisor_spec("xen"), HypervisorSpec{XenSpec{}});
  const auto sim = parse_hypervisor_spec("sim:/tmp/world");
  ASSERT_TRUE(sim);
  ASSERT_NE(sim_world_dir(*sim), nullptr);
  EXPECT_EQ(*sim_world_dir(*sim), "/tmp/world");
  EXPECT_EQ(sim_world_dir(XenSpec{}), nullptr);
  // Everything after the prefix is the directory, colons included.
  EXPECT_EQ(parse_hypervisor_spec("sim:a:b"), HypervisorSpec{SimSpec{"a:b"}});
}

TEST(HypervisorSpec, RefusesAnythingElse) {
  for (const char* bad : {"", "kvm", "sim:", "sim", "Xen", "xen ", " xen", "sim/tmp", "SIM:/w"})
    EXPECT_FALSE(parse_hypervisor_spec(bad)) << "'" << bad << "'";
}

TEST(HypervisorSpec, FormattedSimSpecParsesBackToTheSameWorld) {
  for (const char* dir : {"/tmp/world", "relative/dir", "a:b", "/with space", "/"}) {
    const std::string text = format_sim_spec(dir);
    EXPECT_EQ(parse_hypervisor_spec(text), HypervisorSpec{SimSpec{dir}}) << text;
  }
  EXPECT_FALSE(parse_hypervisor_spec(format_sim_spec(""))) << "no world, no spec";
}

}  // namespace
}  // namespace unetback::hv
