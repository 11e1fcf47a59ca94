#include "backend/daemon/instance_lock.hpp"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/daemon/tunables.hpp"
#include "common/util/log.hpp"

namespace unetback::daemon {
namespace {

/// The program file process `pid` runs (/proc/<pid>/exe), without the " (deleted)" the link
/// shows once an upgrade replaced the file; "" when the process is gone or its link cannot be
/// read (another user's process, to a daemon without CAP_SYS_PTRACE).
std::string program_of(const std::string& pid) {
  std::error_code ec;
  std::string path = std::filesystem::read_symlink("/proc/" + pid + "/exe", ec).string();
  if (ec) return "";
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

std::string read_small_file(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

InstanceLock InstanceLock::acquire(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) {
    throw SetupError("cannot open the lock file " + path + ": " + last_errno().message() +
                     " (--lock-file chooses another)");
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string holder = read_small_file(fd.get());
      throw SetupError("another unetbackd" + (holder.empty() ? "" : " (pid " + holder + ")") +
                       " already serves this backend domain: " + path +
                       " is locked; not touching any vif");
    }
    throw SetupError("cannot lock " + path + ": " + errno_code(err).message());
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    log::write(log::Level::warn, "unetbackd",
               "cannot write our pid into " + path + ": " + last_errno().message());
  }
  return InstanceLock(path, std::move(fd));
}

InstanceLock InstanceLock::take_over(const std::string& path, int timeout_ms) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid())
    throw SetupError("cannot open the lock file " + path + ": " + last_errno().message());
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
    fd.reset();
    return acquire(path);  // nobody to take over from
  }
  const std::string holder = read_small_file(fd.get());
  const auto pid = hv::parse_xs_uint<std::uint32_t>(holder);
  if (!pid || !is_live_daemon(static_cast<pid_t>(*pid)))
    throw SetupError(path + " is locked by a process that is not an unetbackd (" + holder + ")");
  if (::kill(static_cast<pid_t>(*pid), SIGUSR2) != 0)
    throw SetupError("cannot signal unetbackd pid " + holder + ": " + last_errno().message());
  log::write(log::Level::info, "unetbackd", "asked pid " + holder + " to hand over");
  for (int waited = 0; waited < timeout_ms; waited += 2) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      fd.reset();
      return acquire(path);
    }
    ::usleep(2000);
  }
  throw SetupError("pid " + holder + " did not hand over within " + std::to_string(timeout_ms) +
                   " ms");
}

std::string owner_node(DomId self) {
  return tunables_dir(self) + "/owner";
}

bool is_live_daemon(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;  // EPERM: alive, not ours
  // A zombie (killed, not reaped yet by its parent) serves nothing: its lock is already gone.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  if (const auto close = line.rfind(')');
      close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z')
    return false;
  // The same user and the same program file: a process that only has the name (any local
  // user can start one called unetbackd, and wait for a stale pid to come round) is not one.
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0 || st.st_uid != ::geteuid())
    return false;
  const std::string theirs = program_of(std::to_string(pid));
  return !theirs.empty() && theirs == program_of("self");
}

void claim_owner_node(hv::XenStore& xs, DomId self) {
  const std::string node = owner_node(self);
  const pid_t me = ::getpid();
  std::optional<std::string> holder;
  const auto ec = hv::transact(xs, [&](hv::XsTx tx) -> std::error_code {
    holder.reset();
    if (auto cur = xs.read(node, tx)) {
      const auto pid = hv::parse_xs_uint<std::uint32_t>(*cur);
      if (pid && static_cast<pid_t>(*pid) != me && is_live_daemon(static_cast<pid_t>(*pid))) {
        holder = *cur;
        return std::make_error_code(std::errc::device_or_resource_busy);
      }
      // Absent, garbage, or a daemon that died without removing it: ours now.
    }
    return xs.write(node, std::to_string(me), tx);
  });
  if (holder) {
    throw SetupError("another unetbackd (pid " + *holder + ") already serves domain " +
                     std::to_string(self.value()) + " (xenstore " + node +
                     "); not touching any vif");
  }
  if (ec == std::errc::permission_denied) {
    // A driver domain: the toolstack makes its /local/domain/<self> read-only to it, so the
    // node cannot be created unless dom0 made the directory ours. The lock file still keeps
    // a second daemon of this domain out.
    log::write(log::Level::warn, "unetbackd",
               "cannot write " + node + " (" + ec.message() +
                   "): only the lock file guards this backend domain; dom0 can give us " +
                   tunables_dir(self) + " (xenstore-chmod ... n" + std::to_string(self.value()) +
                   ")");
    return;
  }
  if (ec) throw SetupError("cannot write " + node + ": " + ec.message());
}

void release_owner_node(hv::XenStore& xs, DomId self) {
  const std::string node = owner_node(self);
  const auto cur = xs.read(node);
  if (cur && *cur == std::to_string(::getpid())) (void)xs.rm(node);
}

}  // namespace unetback::daemon
