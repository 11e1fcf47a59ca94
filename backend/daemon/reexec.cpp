#include "backend/daemon/reexec.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string_view>
#include <system_error>
#include <unistd.h>

namespace unetback::daemon {
namespace {

constexpr int kFirstFd = 3;

std::string errno_text(const std::string& what) {
  return what + ": " + std::system_category().message(errno);
}

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

std::string exec_with_fds(const std::string& program, const std::vector<std::string>& argv,
                          std::vector<std::pair<std::string, UniqueFd>>&& fds) {
  const int n = static_cast<int>(fds.size());
  // First every fd above the range it goes to, so that placing one never closes another.
  std::vector<UniqueFd> high;
  std::vector<std::string> names;
  for (auto& [name, fd] : fds) {
    UniqueFd h(::fcntl(fd.get(), F_DUPFD_CLOEXEC, kFirstFd + n));
    if (!h) return errno_text("cannot move fd " + std::to_string(fd.get()));
    fd.reset();
    high.push_back(std::move(h));
    names.push_back(name);
  }
  for (int i = 0; i < n; ++i) {
    // dup2 clears close-on-exec on the copy; whatever sat at kFirstFd + i is closed.
    if (::dup2(high[static_cast<std::size_t>(i)].get(), kFirstFd + i) < 0)
      return errno_text("cannot place fd " + std::to_string(kFirstFd + i));
  }
  high.clear();
  // Nothing else crosses: every other descriptor of this image (rings' gntdev, ports' evtchn,
  // xenstore, the lock) closes at the execve, so the new image finds the ports unbound.
  if (::close_range(static_cast<unsigned>(kFirstFd + n), ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    return errno_text("cannot mark descriptors close-on-exec");
  const auto env = listen_environment(environ, ::getpid(), names);
  std::vector<char*> envp, args;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execve(program.c_str(), args.data(), envp.data());
  return errno_text("cannot execute " + program);
}

}  // namespace unetback::daemon
