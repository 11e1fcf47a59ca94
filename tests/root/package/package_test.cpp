// Issue 17's package check, as root on the build machine: the .debs that `tools/lab.sh
// package` built ($UNETBACK_DEB_DIR, default build-package/ in the source tree) install with
// their maintainer scripts succeeding, ship the expected paths (dpkg -L), enable the unit;
// remove and purge then leave every file list of the directories they touch as it was.
// Needs dpkg and no unetback package installed already; run it under the root lock.
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct Ran {
  int status = -1;
  std::string out;  // stdout and stderr
};

Ran sh(const std::string& cmd) {
  Ran r;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// dpkg, retried while another dpkg or apt holds the lock (other work on the machine).
Ran dpkg(const std::string& args) {
  Ran r;
  for (int i = 0; i < 60; ++i) {
    r = sh("dpkg " + args);
    if (r.status == 0 || r.out.find("dpkg frontend lock") == std::string::npos) break;
    std::this_thread::sleep_for(2s);
  }
  return r;
}

// What the packages or their maintainer scripts may touch (files, symlinks, directories).
// NOLINTNEXTLINE(readability-identifier-naming): a constant table, named as the constexpr ones.
const char* const kWatched[] = {"/etc/modprobe.d",
                                "/etc/xen",
                                "/etc/systemd/system",
                                "/lib/systemd/system",
                                "/usr/bin",
                                "/usr/sbin",
                                "/usr/share/man/man1",
                                "/usr/share/man/man8",
                                "/usr/share/doc",
                                "/usr/share/lintian/overrides",
                                "/var/lib/systemd/deb-systemd-helper-enabled",
                                "/var/lib/systemd/deb-systemd-helper-masked"};

std::set<std::string> file_list() {
  std::set<std::string> out;
  for (const char* dir : kWatched) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) continue;
    out.insert(dir);
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      out.insert(it->path().string());
  }
  return out;
}

std::string deb_dir() {
  const char* env = std::getenv("UNETBACK_DEB_DIR");
  return env != nullptr && *env != '\0' ? env : UNETBACK_DEB_DIR_DEFAULT;
}

/// The one `<package>_*.deb` in the directory (not the -dbgsym ones), or "".
std::string find_deb(const std::string& package) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(deb_dir(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(package + "_", 0) == 0 && name.ends_with(".deb")) return e.path().string();
  }
  return "";
}

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.insert(l);
  return out;
}

bool installed(const std::string& package) {
  return sh("dpkg-query -W -f='${Status}' " + package +
            " 2>/dev/null | grep -q 'install ok installed'")
             .status == 0;
}

TEST(Package, InstallShipsTheFilesAndRemoveAndPurgeLeaveNothingBehind) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (dpkg -i)";
  ASSERT_EQ(sh("command -v dpkg").status, 0);
  const std::string daemon_deb = find_deb("unetback"), lab_deb = find_deb("unetback-lab");
  ASSERT_FALSE(daemon_deb.empty() || lab_deb.empty())
      << "no unetback_*.deb and unetback-lab_*.deb in " << deb_dir()
      << ": run tools/lab.sh package first";
  ASSERT_FALSE(installed("unetback") || installed("unetback-lab"))
      << "unetback is installed on this machine already: this test needs it absent";

  const auto before = file_list();
  Ran r = dpkg("-i " + daemon_deb + " " + lab_deb);
  ASSERT_EQ(r.status, 0) << "dpkg -i (maintainer scripts included):\n" << r.out;

  // What each package holds: the daemon's side in unetback, the test programs apart.
  const auto daemon_files = lines_of(dpkg("-L unetback").out);
  for (const char* path :
       {"/usr/sbin/unetbackd", "/usr/bin/unetback-ctl", "/etc/xen/scripts/vif-unetback",
        "/etc/modprobe.d/unetback.conf", "/lib/systemd/system/unetbackd.service",
        "/lib/systemd/system/unetbackd-driver-domain.service", "/usr/share/man/man8/unetbackd.8.gz",
        "/usr/share/man/man8/unetback-ctl.8.gz", "/usr/share/man/man8/vif-unetback.8.gz",
        "/usr/share/doc/unetback/copyright"})
    EXPECT_TRUE(daemon_files.count(path)) << path;
  for (const char* path : {"/usr/bin/xensim", "/usr/bin/unetback-xl", "/usr/bin/netfront-shim"})
    EXPECT_FALSE(daemon_files.count(path)) << path << " belongs in unetback-lab, not on a dom0";
  const auto lab_files = lines_of(dpkg("-L unetback-lab").out);
  for (const char* path :
       {"/usr/bin/xensim", "/usr/bin/unetback-xl", "/usr/bin/netfront-shim",
        "/usr/share/man/man1/netfront-shim.1.gz", "/usr/share/man/man1/xensim.1.gz",
        "/usr/share/man/man1/unetback-xl.1.gz"})
    EXPECT_TRUE(lab_files.count(path)) << path;
  EXPECT_TRUE(fs::exists("/usr/sbin/unetbackd"));
  EXPECT_EQ(fs::status("/etc/xen/scripts/vif-unetback").permissions() & fs::perms::owner_exec,
            fs::perms::owner_exec);
  // The installed programs run (their libraries are in the package's Depends).
  EXPECT_EQ(sh("/usr/sbin/unetbackd --help").status, 0);
  EXPECT_EQ(sh("/usr/bin/unetback-ctl --help").status, 0);
  EXPECT_EQ(sh("/usr/bin/xensim --help").status, 0);

  // dh_installsystemd enabled both units (their conditions decide where each runs).
  EXPECT_TRUE(fs::is_symlink("/etc/systemd/system/multi-user.target.wants/unetbackd.service"));
  EXPECT_TRUE(fs::is_symlink(
      "/etc/systemd/system/multi-user.target.wants/unetbackd-driver-domain.service"));
  if (sh("command -v systemd-analyze").status == 0) {
    r =
        sh("systemd-analyze verify /lib/systemd/system/unetbackd.service "
           "/lib/systemd/system/unetbackd-driver-domain.service");
    EXPECT_EQ(r.status, 0) << r.out;
  }
  // kmod reads the modprobe file: no alias load, and an explicit load runs /bin/false.
  if (sh("command -v modprobe").status == 0) {
    const std::string config = sh("modprobe --showconfig").out;
    EXPECT_NE(config.find("blacklist xen_netback\n"), std::string::npos);
    EXPECT_NE(config.find("install xen_netback /bin/false\n"), std::string::npos);
  }
  // With systemd running and no Xen here, the unit's conditions skip it: not failed.
  if (fs::exists("/run/systemd/system") && !fs::exists("/proc/xen/capabilities")) {
    sh("systemctl start unetbackd.service");
    EXPECT_NE(sh("systemctl is-failed --quiet unetbackd.service").status, 0)
        << sh("systemctl status unetbackd.service").out;
  }

  r = dpkg("-r unetback unetback-lab");
  ASSERT_EQ(r.status, 0) << "dpkg -r:\n" << r.out;
  EXPECT_FALSE(fs::exists("/usr/sbin/unetbackd"));
  EXPECT_FALSE(fs::exists("/lib/systemd/system/unetbackd.service"));
  r = dpkg("-P unetback unetback-lab");
  ASSERT_EQ(r.status, 0) << "dpkg -P:\n" << r.out;

  const auto after = file_list();
  std::vector<std::string> left, gone;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(left));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(gone));
  std::string l, g;
  for (const auto& p : left) l += "  " + p + "\n";
  for (const auto& p : gone) g += "  " + p + "\n";
  EXPECT_TRUE(left.empty()) << "left behind after purge:\n" << l;
  EXPECT_TRUE(gone.empty()) << "removed although not ours:\n" << g;
}

// The daemon's fault-injection hooks are a test build's (-Dfault_injection=true): the packaged
// unetbackd has no code for them, so no variable of theirs (UNETBACKD_DIE_AT_HANDOVER_STEP: a
// SIGKILL in the middle of a handover) can make it misbehave. Its name is nowhere in the binary.
TEST(Package, TheShippedDaemonHasNoFaultInjectionHook) {
  ASSERT_EQ(sh("command -v dpkg-deb").status, 0);
  const std::string deb = find_deb("unetback");
  ASSERT_FALSE(deb.empty()) << "no unetback_*.deb in " << deb_dir()
                            << ": run tools/lab.sh package first";
  char tmpl[] = "/tmp/unetback-package-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const Ran x = sh("dpkg-deb -x " + deb + " " + dir);
  ASSERT_EQ(x.status, 0) << x.out;
  std::ifstream in(dir + "/usr/sbin/unetbackd", std::ios::binary);
  const std::string binary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove_all(dir, ec);
  ASSERT_TRUE(
      binary.starts_with("\x7f"
                         "ELF"))
      << "no /usr/sbin/unetbackd in " << deb;
  EXPECT_EQ(binary.find("UNETBACKD_DIE_AT_HANDOVER_STEP"), std::string::npos)
      << "the packaged unetbackd reads UNETBACKD_DIE_AT_HANDOVER_STEP: a test hook in a "
         "production binary";
}

}  // namespace
