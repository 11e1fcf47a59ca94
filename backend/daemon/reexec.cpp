#include "backend/daemon/reexec.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string_view>
#include <system_error>
#include <unistd.h>

namespace unetback::daemon {
namespace {

constexpr int kFirstFd = 3;

}  // namespace

std::string program_path_now() {
  std::string buf(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
  if (n <= 0 || static_cast<std::size_t>(n) >= buf.size()) return {};
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

std::vector<std::string> listen_environment(const char* const* environ, pid_t pid,
                                            const std::vector<std::string>& names) {
  std::vector<std::string> env;
  for (const char* const* e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("LISTEN_PID=") || v.starts_with("LISTEN_FDS=") ||
        v.starts_with("LISTEN_FDNAMES="))
      continue;
    env.emplace_back(v);
  }
  if (names.empty()) return env;
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ":") + n;
  env.push_back("LISTEN_PID=" + std::to_string(pid));
  env.push_back("LISTEN_FDS=" + std::to_string(names.size()));
  env.push_back("LISTEN_FDNAMES=" + joined);
  return env;
}

namespace {

/// "NAME=" and room for a pid, filled in by the child (after the fork nothing may allocate).
struct PidSlot {
  explicit PidSlot(std::string_view name) : prefix(name.size() + 1) {
    text = std::string(name) + "=" + std::string(kDigits + 1, '\0');
  }
  /// Async-signal-safe: digits written in place, NUL-terminated.
  void fill(pid_t pid) {
    char digits[kDigits];
    int n = 0;
    auto v = static_cast<unsigned long>(pid);
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0 && n < kDigits);
    for (int i = 0; i < n; ++i) text[prefix + static_cast<std::size_t>(i)] = digits[n - 1 - i];
    text[prefix + static_cast<std::size_t>(n)] = '\0';
  }
  static constexpr int kDigits = 20;
  std::size_t prefix;
  std::string text;
};

}  // namespace

Result<pid_t> spawn_with_fds(const std::string& program, const std::vector<std::string>& argv,
                             const std::vector<std::pair<std::string, int>>& fds) {
  const int n = static_cast<int>(fds.size());
  // Copies above the range they go to, so that placing one never closes another.
  std::vector<UniqueFd> high;
  std::vector<std::string> names;
  for (const auto& [name, fd] : fds) {
    UniqueFd h(::fcntl(fd, F_DUPFD_CLOEXEC, kFirstFd + n));
    if (!h) return std::error_code(errno, std::system_category());
    high.push_back(std::move(h));
    names.push_back(name);
  }
  // Everything the child needs is made here: after a fork in a threaded process the child may
  // only make async-signal-safe calls.
  std::vector<std::string> env;
  for (auto& e : listen_environment(environ, 0, names))
    if (!e.starts_with("LISTEN_PID=") && !e.starts_with("WATCHDOG_PID=")) env.push_back(e);
  PidSlot listen_pid("LISTEN_PID");
  PidSlot watchdog_pid("WATCHDOG_PID");
  std::vector<char*> envp, args;
  for (auto& e : env) envp.push_back(e.data());
  if (n > 0) envp.push_back(listen_pid.text.data());
  // NOLINTNEXTLINE(concurrency-mt-unsafe): only read; nothing sets the environment meanwhile.
  if (std::getenv("WATCHDOG_USEC") != nullptr) envp.push_back(watchdog_pid.text.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<int> high_raw(high.size());
  for (std::size_t i = 0; i < high.size(); ++i) high_raw[i] = high[i].get();

  const pid_t child = ::fork();
  if (child < 0) return std::error_code(errno, std::system_category());
  if (child == 0) {
    const pid_t self = ::getpid();
    listen_pid.fill(self);
    watchdog_pid.fill(self);
    for (int i = 0; i < n; ++i) {
      // dup2 clears close-on-exec on the copy; whatever sat at kFirstFd + i is closed.
      if (::dup2(high_raw[static_cast<std::size_t>(i)], kFirstFd + i) < 0) ::_exit(127);
    }
    // Nothing else crosses: the parent's rings, ports, xenstore connection and lock stay its own.
    (void)::close_range(static_cast<unsigned>(kFirstFd + n), ~0U, CLOSE_RANGE_CLOEXEC);
    sigset_t none;
    sigemptyset(&none);
    (void)::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    ::execve(program.c_str(), args.data(), envp.data());
    ::_exit(127);
  }
  return child;
}

}  // namespace unetback::daemon
