#include "backend/daemon/daemon_options.hpp"

#include <gtest/gtest.h>

namespace unetback::daemon {
namespace {

std::variant<DaemonOptions, std::string> parse(std::initializer_list<std::string_view> a) {
  std::vector<std::string_view> v(a);
  return parse_daemon_args(v);
}

TEST(DaemonOptions, XenDefaults) {
  auto r = parse({"--hypervisor", "xen"});
  ASSERT_TRUE(std::holds_alternative<DaemonOptions>(r)) << std::get<std::string>(r);
  const auto& o = std::get<DaemonOptions>(r);
  EXPECT_EQ(o.hypervisor, hv::HypervisorSpec{hv::XenSpec{}});
  EXPECT_EQ(o.control_path, "/run/unetback/unetbackd.sock");
  EXPECT_EQ(o.log_level, log::Level::info);
  EXPECT_EQ(o.tunables, vif::Tunables{});
  EXPECT_TRUE(o.explicit_tunables.empty());
  EXPECT_FALSE(o.backend_domid.has_value());
}

TEST(DaemonOptions, SimWorldTunablesAndEqualsForm) {
  auto r = parse({"--hypervisor=sim:/tmp/w", "--max-queues", "8", "--rx-coalesce=legacy",
                  "--log-level", "debug", "--backend-domid", "3"});
  ASSERT_TRUE(std::holds_alternative<DaemonOptions>(r)) << std::get<std::string>(r);
  const auto& o = std::get<DaemonOptions>(r);
  EXPECT_EQ(o.hypervisor, hv::HypervisorSpec{hv::SimSpec{"/tmp/w"}});
  EXPECT_EQ(o.control_path, "/tmp/w/unetbackd.sock");
  EXPECT_EQ(o.tunables.max_queues, 8U);
  EXPECT_FALSE(o.tunables.rx_coalesce_full);
  EXPECT_EQ(o.explicit_tunables, (std::vector<std::string>{"max-queues", "rx-coalesce"}));
  EXPECT_EQ(o.log_level, log::Level::debug);
  EXPECT_EQ(o.backend_domid, DomId{3});
}

TEST(DaemonOptions, SwitchUplinksAreNamedPairs) {
  auto r = parse({"--hypervisor", "xen", "--switch-uplink", "lab=usw0", "--switch-uplink=b=tap-b"});
  ASSERT_TRUE(std::holds_alternative<DaemonOptions>(r)) << std::get<std::string>(r);
  const auto& o = std::get<DaemonOptions>(r);
  EXPECT_EQ(o.switch_uplinks,
            (std::map<std::string, std::string>{{"lab", "usw0"}, {"b", "tap-b"}}));
  for (auto bad : {"lab", "lab=", "=usw0", "a b=usw0", "lab=bad/name", "lab=0123456789abcdef"}) {
    EXPECT_TRUE(
        std::holds_alternative<std::string>(parse({"--hypervisor", "xen", "--switch-uplink", bad})))
        << bad;
  }
  EXPECT_TRUE(std::holds_alternative<std::string>(
      parse({"--hypervisor", "xen", "--switch-uplink", "a=t1", "--switch-uplink", "a=t2"})));
}

TEST(DaemonOptions, ExplicitControlPath) {
  auto r = parse({"--control", "/x/y.sock", "--hypervisor", "sim:/w"});
  ASSERT_TRUE(std::holds_alternative<DaemonOptions>(r));
  EXPECT_EQ(std::get<DaemonOptions>(r).control_path, "/x/y.sock");
}

TEST(DaemonOptions, HelpWinsOverEverything) {
  auto r = parse({"--help", "--bogus"});
  ASSERT_TRUE(std::holds_alternative<DaemonOptions>(r));
  EXPECT_TRUE(std::get<DaemonOptions>(r).help);
  const std::string usage = daemon_usage();
  EXPECT_NE(usage.find("Exit status"), std::string::npos);
  EXPECT_NE(usage.find("--fatal-skb-slots 19..64"), std::string::npos);
}

TEST(DaemonOptions, BadCommandLines) {
  const auto error = [](std::initializer_list<std::string_view> a) {
    auto r = parse(a);
    return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string();
  };
  EXPECT_EQ(error({}), "--hypervisor is required (xen or sim:<world-dir>)");
  EXPECT_NE(error({"--hypervisor", "kvm"}), "");
  EXPECT_NE(error({"--hypervisor", "sim:"}), "");
  EXPECT_EQ(error({"--hypervisor"}), "--hypervisor needs a value");
  EXPECT_EQ(error({"--hypervisor", "xen", "--bogus", "1"}), "unknown option --bogus");
  EXPECT_EQ(error({"--hypervisor", "xen", "stray"}), "unexpected argument 'stray'");
  EXPECT_EQ(error({"--hypervisor", "xen", "--threads", "0"}), "--threads: 0 is out of range 1..64");
  EXPECT_NE(error({"--hypervisor", "xen", "--log-level", "loud"}), "");
  EXPECT_NE(error({"--hypervisor", "xen", "--backend-domid", "32752"}), "");
  EXPECT_NE(error({"--hypervisor", "xen", "--control", ""}), "");
}

}  // namespace
}  // namespace unetback::daemon
