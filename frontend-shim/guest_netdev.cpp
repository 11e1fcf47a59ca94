#include "frontend-shim/guest_netdev.hpp"

#include <array>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util/unique_fd.hpp"

extern char** environ;

namespace unetback::shim {

std::error_code enter_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return last_errno();
  if (::setns(fd.get(), CLONE_NEWNET) != 0) return last_errno();
  return {};
}

std::error_code add_address(const std::string& ifname, const std::string& cidr) {
  // iproute2 lives in /usr/sbin (merged /sbin); a root PATH may lack it, so try the usual
  // places rather than trusting PATH.
  static constexpr std::array<const char*, 4> kCandidates = {"/usr/sbin/ip", "/sbin/ip",
                                                             "/usr/bin/ip", "/bin/ip"};
  const char* ip = nullptr;
  for (const char* c : kCandidates)
    if (::access(c, X_OK) == 0) {
      ip = c;
      break;
    }
  if (!ip) return std::make_error_code(std::errc::no_such_file_or_directory);
  // argv is built from validated values and passed as separate words: no shell involved.
  std::string a0 = "ip", a1 = "addr", a2 = "add", a4 = "dev";
  std::string addr = cidr, dev = ifname;
  char* argv[] = {a0.data(), a1.data(), a2.data(), addr.data(), a4.data(), dev.data(), nullptr};
  pid_t pid = -1;
  if (const int rc = ::posix_spawn(&pid, ip, nullptr, nullptr, argv, environ); rc != 0)
    return {rc, std::generic_category()};
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return last_errno();
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::make_error_code(std::errc::invalid_argument);
  return {};
}

Result<net::TapDevice> create_guest_tap(const net::TapConfig& config, const std::string& address,
                                        std::string& what) {
  what = "create TAP " + config.name;
  auto tap = net::TapDevice::create(config);
  if (!tap) return tap.error();
  what = "bring " + config.name + " up";
  if (auto ec = tap->set_up(true)) return ec;
  if (!address.empty()) {
    what = "add address " + address + " to " + config.name;
    if (auto ec = add_address(config.name, address)) return ec;
  }
  what.clear();
  return std::move(*tap);
}

}  // namespace unetback::shim
