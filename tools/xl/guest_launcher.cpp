#include "tools/xl/guest_launcher.hpp"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace unetback::toolstack {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& text, std::size_t max_lines) {
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (std::size_t n = 0; n < max_lines && pos > 0; ++n) {
    const std::size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + (pos < text.size() && text[pos] == '\n' ? 1 : 0));
}

/// The ready line, if the log has it.
std::optional<std::string> find_line(const std::string& text, const std::string& prefix) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) return std::nullopt;  // only complete lines
    if (text.compare(start, prefix.size(), prefix) == 0) return text.substr(start, nl - start);
    start = nl + 1;
  }
  return std::nullopt;
}

}  // namespace

std::variant<LaunchedGuest, LaunchFailure> launch_guest(const GuestLaunch& launch) {
  const int log = ::open(launch.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0)
    return LaunchFailure{"cannot create " + launch.log_path + ": " + last_errno().message()};
  std::vector<char*> argv;
  for (const auto& a : launch.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return LaunchFailure{"fork: " + last_errno().message()};
  }
  if (pid == 0) {
    (void)::setsid();
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) (void)::dup2(devnull, 0);
    (void)::dup2(log, 1);
    (void)::dup2(log, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log);

  const auto deadline = std::chrono::steady_clock::now() + launch.ready_timeout;
  for (;;) {
    const std::string text = read_file(launch.log_path);
    if (auto line = find_line(text, launch.ready_prefix)) return LaunchedGuest{pid, *line};
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      std::string why = WIFEXITED(status)
                            ? "exited with status " + std::to_string(WEXITSTATUS(status))
                            : "killed by signal " + std::to_string(WTERMSIG(status));
      if (WIFEXITED(status) && WEXITSTATUS(status) == 127) why += " (could not exec)";
      return LaunchFailure{launch.argv[0] + " " + why + "; its log (" + launch.log_path + "):\n" +
                           tail(read_file(launch.log_path), 15)};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      (void)::kill(pid, SIGTERM);
      for (int i = 0; i < 300 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (::waitpid(pid, &status, WNOHANG) == 0) {
        (void)::kill(pid, SIGKILL);
        (void)::waitpid(pid, &status, 0);
      }
      return LaunchFailure{launch.argv[0] + " was not ready within " +
                           std::to_string(launch.ready_timeout.count()) + " ms; its log (" +
                           launch.log_path + "):\n" + tail(read_file(launch.log_path), 15)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool process_is(pid_t pid, const std::string& program) {
  if (pid <= 0) return false;
  const std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
  return !argv0.empty() && argv0.ends_with(program);
}

bool terminate_process(pid_t pid, std::chrono::milliseconds grace) {
  if (::kill(pid, SIGTERM) != 0) return errno == ESRCH;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    // A zombie (its parent has not reaped it yet) has exited too.
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto close_paren = stat.rfind(')');
    if (stat.empty() || (close_paren != std::string::npos && close_paren + 2 < stat.size() &&
                         stat[close_paren + 2] == 'Z'))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (void)::kill(pid, SIGKILL);
  return false;
}

}  // namespace unetback::toolstack
