#include "backend/daemon/daemon_options.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

/// The [Service] section of a systemd unit's source (tools/dist/<name>.in): each key's
/// values in the order given (comments and blank lines left out).
std::map<std::string, std::vector<std::string>> service_section(const std::string& name) {
  std::ifstream in(std::string(UNETBACK_DIST_DIR) + "/" + name + ".in");
  EXPECT_TRUE(in) << name;
  std::map<std::string, std::vector<std::string>> keys;
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line;
      continue;
    }
    const auto eq = line.find('=');
    if (section == "[Service]" && eq != std::string::npos)
      keys[line.substr(0, eq)].push_back(line.substr(eq + 1));
  }
  return keys;
}

/// Whether a unit's exit status list (space-separated) holds `status`.
bool lists(const std::vector<std::string>& values, int status) {
  for (const auto& v : values) {
    std::istringstream words(v);
    for (std::string w; words >> w;)
      if (w == std::to_string(status)) return true;
  }
  return false;
}

// A driver domain restarts its daemon as dom0 does (`systemctl restart`, a crash, a package
// upgrade): both units take the handover's exit as a success and start the successor after
// it, keep the state records in /run/unetback and the TAP queues in the fd store over a
// restart, and never restart a bad command line. Their [Service] sections differ only in the
// condition that picks the kind of domain each runs in.
TEST(ServiceUnits, TheDriverDomainUnitRestartsLiveAsTheDom0UnitDoes) {
  auto dom0 = service_section("unetbackd.service");
  auto driver = service_section("unetbackd-driver-domain.service");
  for (auto* unit : {&dom0, &driver}) {
    const std::string name =
        unit == &dom0 ? "unetbackd.service" : "unetbackd-driver-domain.service";
    EXPECT_EQ((*unit)["Type"], std::vector<std::string>{"notify"}) << name;
    EXPECT_TRUE(lists((*unit)["SuccessExitStatus"], kExitHandedOver)) << name;
    EXPECT_TRUE(lists((*unit)["RestartForceExitStatus"], kExitHandedOver)) << name;
    EXPECT_TRUE(lists((*unit)["RestartPreventExitStatus"], kExitUsage)) << name;
    EXPECT_EQ((*unit)["RuntimeDirectory"], std::vector<std::string>{"unetback"}) << name;
    EXPECT_EQ((*unit)["RuntimeDirectoryPreserve"], std::vector<std::string>{"yes"}) << name;
    ASSERT_EQ((*unit)["FileDescriptorStoreMax"].size(), 1U) << name;
    EXPECT_GT(std::stoul((*unit)["FileDescriptorStoreMax"][0]), 0U) << name;
    EXPECT_EQ((*unit)["ExecCondition"].size(), 1U) << name;
    unit->erase("ExecCondition");
  }
  std::set<std::string> keys;
  for (const auto* unit : {&dom0, &driver})
    for (const auto& [key, values] : *unit) keys.insert(key);
  for (const auto& key : keys)
    EXPECT_EQ(driver[key], dom0[key]) << key << ": the driver-domain unit differs from dom0's";
}

}  // namespace
}  // namespace unetback::daemon
