// Opening the real-Xen objects on a machine without Xen: each fails at once with a
// SetupError that names the device (or socket) it tried and points at xensim.
#include <cstdlib>
#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/hv/xen/xen_domain_info.hpp"
#include "common/hv/xen/xen_event_channel.hpp"
#include "common/hv/xen/xen_grant_sharer.hpp"
#include "common/hv/xen/xen_grant_table.hpp"
#include "common/hv/xen/xen_hypervisor.hpp"
#include "common/hv/xen/xen_xenstore.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::hv {
namespace {

using ::testing::HasSubstr;

bool exists(const char* path) {
  return ::access(path, F_OK) == 0;
}

#define SKIP_IF_PRESENT(path) \
  if (exists(path)) GTEST_SKIP() << (path) << " exists: this machine has Xen"

/// The message of the SetupError `f` throws ("" if it throws none).
template <typename F>
std::string setup_error_of(F&& f) {
  try {
    f();
  } catch (const SetupError& e) {
    return e.what();
  }
  return {};
}

/// Sets or unsets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) saved_ = v;
  }
  ~ScopedEnv() {
    if (saved_) {
      ::setenv(name_, saved_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const std::string& v) { ::setenv(name_, v.c_str(), 1); }
  void unset() { ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

/// A mkdtemp directory, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "unetback-hv-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string file(const char* name) const { return (path_ / name).string(); }
  [[nodiscard]] std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

void expect_names_device_and_sim(const std::string& msg, const char* device) {
  EXPECT_THAT(msg, HasSubstr(device));
  EXPECT_THAT(msg, HasSubstr("No such file or directory"));
  EXPECT_THAT(msg, HasSubstr("--hypervisor sim:<world-dir>"));
  EXPECT_THAT(msg, HasSubstr("xensim"));
}

TEST(XenOpen, GrantTableNamesGntdevAndSuggestsXensim) {
  SKIP_IF_PRESENT("/dev/xen/gntdev");
  const auto msg = setup_error_of([] { XenGrantTable gt(64); });
  expect_names_device_and_sim(msg, "/dev/xen/gntdev");
}

TEST(XenOpen, GrantTableWithGrantLimitFailsTheSameWay) {
  SKIP_IF_PRESENT("/dev/xen/gntdev");
  const auto msg = setup_error_of([] { XenGrantTable gt(16, 1024); });
  expect_names_device_and_sim(msg, "/dev/xen/gntdev");
}

TEST(XenOpen, GrantTableRejectsZeroBatchBeforeOpeningAnything) {
  EXPECT_THAT(setup_error_of([] { XenGrantTable gt(0); }), HasSubstr("batch"));
}

TEST(XenOpen, GrantSharerNamesGntallocAndSuggestsXensim) {
  SKIP_IF_PRESENT("/dev/xen/gntalloc");
  const auto msg = setup_error_of([] { XenGrantSharer gs; });
  expect_names_device_and_sim(msg, "/dev/xen/gntalloc");
}

TEST(XenOpen, EventChannelNamesEvtchnAndSuggestsXensim) {
  SKIP_IF_PRESENT("/dev/xen/evtchn");
  const auto msg = setup_error_of([] { XenEventChannel ec; });
  expect_names_device_and_sim(msg, "/dev/xen/evtchn");
}

TEST(XenOpen, XenstoreNamesTheDefaultSocketAndXenbus) {
  SKIP_IF_PRESENT("/var/run/xenstored/socket");
  SKIP_IF_PRESENT("/dev/xen/xenbus");
  ScopedEnv path("XENSTORED_PATH"), rundir("XENSTORED_RUNDIR");
  path.unset();
  rundir.unset();
  const auto msg = setup_error_of([] { LibXenStore xs; });
  EXPECT_THAT(msg, HasSubstr("/var/run/xenstored/socket"));
  EXPECT_THAT(msg, HasSubstr("/dev/xen/xenbus"));
  EXPECT_THAT(msg, HasSubstr("sim:"));
}

TEST(XenOpen, XenstoreHonoursRundirAndNamesIt) {
  SKIP_IF_PRESENT("/dev/xen/xenbus");
  TempDir dir;
  ScopedEnv path("XENSTORED_PATH"), rundir("XENSTORED_RUNDIR");
  path.unset();
  rundir.set(dir.str());
  const auto msg = setup_error_of([] { LibXenStore xs; });
  EXPECT_THAT(msg, HasSubstr(dir.file("socket")));
  EXPECT_THAT(msg, HasSubstr("No such file or directory"));
}

TEST(XenOpen, XenstoreAtMissingSocketNamesItAndRestoresUnsetEnvironment) {
  TempDir dir;
  const std::string sock = dir.file("xs-dom0.sock");
  ScopedEnv path("XENSTORED_PATH");
  path.unset();
  const auto msg = setup_error_of([&] { LibXenStore xs(sock); });
  EXPECT_THAT(msg, HasSubstr(sock));
  EXPECT_THAT(msg, HasSubstr("No such file or directory"));
  EXPECT_EQ(std::getenv("XENSTORED_PATH"), nullptr);
}

TEST(XenOpen, XenstoreAtMissingSocketRestoresPreviousEnvironment) {
  TempDir dir;
  const std::string sock = dir.file("xs-dom1.sock");
  ScopedEnv path("XENSTORED_PATH");
  path.set("/somewhere/else.sock");
  const auto msg = setup_error_of([&] { LibXenStore xs(sock); });
  EXPECT_THAT(msg, HasSubstr(sock));
  ASSERT_NE(std::getenv("XENSTORED_PATH"), nullptr);
  EXPECT_STREQ(std::getenv("XENSTORED_PATH"), "/somewhere/else.sock");
}

TEST(XenOpen, XenstoreAtSocketNobodyListensOnNamesIt) {
  TempDir dir;
  const std::string sock = dir.file("dead.sock");
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(fd.valid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  sock.copy(addr.sun_path, sock.size());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);  // no listen()
  EXPECT_THAT(setup_error_of([&] { LibXenStore xs(sock); }), HasSubstr(sock));
}

TEST(XenOpen, XenstoreRefusesAnEmptySocketPath) {
  EXPECT_THAT(setup_error_of([] { LibXenStore xs{std::string()}; }), HasSubstr("socket path"));
}

TEST(XenOpen, DefaultXenstoreLocationsFollowTheEnvironment) {
  ScopedEnv path("XENSTORED_PATH"), rundir("XENSTORED_RUNDIR");
  path.unset();
  rundir.unset();
  EXPECT_EQ(default_xenstore_locations(), "/var/run/xenstored/socket or /dev/xen/xenbus");
  rundir.set("/run/x");
  EXPECT_EQ(default_xenstore_locations(), "/run/x/socket or /dev/xen/xenbus");
  path.set("/run/xensim/xs-dom0.sock");
  EXPECT_EQ(default_xenstore_locations(), "/run/xensim/xs-dom0.sock");
}

TEST(XenOpen, BackendHypervisorNeedsGntdev) {
  SKIP_IF_PRESENT("/dev/xen/gntdev");
  HypervisorOptions opts;
  opts.role = Role::backend;
  const auto msg = setup_error_of([&] { (void)open_xen_hypervisor(opts); });
  expect_names_device_and_sim(msg, "/dev/xen/gntdev");
}

TEST(XenOpen, FrontendHypervisorNeedsGntalloc) {
  SKIP_IF_PRESENT("/dev/xen/gntalloc");
  HypervisorOptions opts;
  opts.role = Role::frontend;
  const auto msg = setup_error_of([&] { (void)open_xen_hypervisor(opts); });
  expect_names_device_and_sim(msg, "/dev/xen/gntalloc");
}

TEST(XenDomainInfo, CannotTellWithoutPrivcmd) {
  SKIP_IF_PRESENT("/dev/xen/privcmd");
  SKIP_IF_PRESENT("/proc/xen/privcmd");
  XenDomainInfo info;
  EXPECT_EQ(info.exists(DomId{0}), std::nullopt);
  // The failed open is remembered; asking again is cheap and gives the same answer.
  EXPECT_EQ(info.exists(DomId{1}), std::nullopt);
}

// A suspended guest is not gone: `xl save -c`, a failed migration and Remus/COLO resume it with
// its frontends still connected. A dying one, or one shut down for any other reason
// (poweroff, reboot, crash, watchdog, soft reset), is.
TEST(XenDomainInfo, ASuspendedDomainStillUsesItsDevicesAndAnyOtherShutdownEndsThem) {
  constexpr unsigned kPoweroff = 0, kReboot = 1, kSuspend = 2, kCrash = 3, kWatchdog = 4;
  EXPECT_TRUE(may_use_devices({}));
  EXPECT_TRUE(may_use_devices({.shutdown = true, .shutdown_reason = kSuspend}));
  for (const unsigned reason : {kPoweroff, kReboot, kCrash, kWatchdog, 5U})
    EXPECT_FALSE(may_use_devices({.shutdown = true, .shutdown_reason = reason})) << reason;
  EXPECT_FALSE(may_use_devices({.dying = true}));
  EXPECT_FALSE(may_use_devices({.dying = true, .shutdown = true, .shutdown_reason = kSuspend}));
}

}  // namespace
}  // namespace unetback::hv
