#include "common/hotplug/hotplug_script.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>

extern char** environ;

namespace unetback::hotplug {

std::string HotplugOutcome::describe() const {
  switch (kind) {
    case Kind::exited: return "exited with status " + std::to_string(code);
    case Kind::signalled: return "killed by signal " + std::to_string(code);
    case Kind::timed_out: return "timed out";
  }
  return "?";
}

std::vector<std::string> hotplug_environment(const HotplugCall& call) {
  const std::string dev =
      std::to_string(call.domid.value()) + "/" + std::to_string(call.devid.value());
  std::vector<std::string> env = {
      "script=" + call.script,
      "XENBUS_TYPE=vif",
      "XENBUS_PATH=backend/vif/" + dev,
      "XENBUS_BASE_PATH=backend",
      "netdev=" + call.netdev,
      "vif=vif" + std::to_string(call.domid.value()) + "." + std::to_string(call.devid.value()),
  };
  if (!call.xenstored_path.empty()) env.push_back("XENSTORED_PATH=" + call.xenstored_path);
  return env;
}

std::vector<std::string> hotplug_argv(const HotplugCall& call) {
  return {call.script, call.action, "type_if=vif"};
}

std::string resolve_script_path(const std::string& script) {
  if (script.starts_with('/')) return script;
  if (script.find('/') == std::string::npos) return std::string(kXenScriptDir) + "/" + script;
  std::error_code ec;
  auto abs = std::filesystem::absolute(script, ec);
  return ec ? script : abs.lexically_normal().string();
}

Result<HotplugProcess> HotplugProcess::spawn(const HotplugCall& call,
                                             std::chrono::milliseconds timeout) {
  if (::access(call.script.c_str(), X_OK) != 0) return last_errno();
  // Built before fork: the child only calls async-signal-safe functions (the daemon that
  // calls this has threads).
  const std::vector<std::string> argv_s = hotplug_argv(call);
  std::vector<std::string> env_s;
  const std::vector<std::string> extra = hotplug_environment(call);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const auto key = kv.substr(0, kv.find('=') + 1);
    bool overridden = false;
    for (const auto& x : extra) overridden = overridden || x.starts_with(key);
    if (!overridden) env_s.emplace_back(kv);
  }
  env_s.insert(env_s.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  std::vector<char*> envp;
  argv.reserve(argv_s.size() + 1);
  envp.reserve(env_s.size() + 1);
  for (const auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_s) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return last_errno();
  if (pid == 0) {
    (void)::setpgid(0, 0);  // its own group: a timeout kills the script and its children
    // Signals the parent ignores stay ignored across exec; a shell script wants the defaults.
    (void)::signal(SIGPIPE, SIG_DFL);
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) (void)::dup2(devnull, 0);
    (void)::dup2(2, 1);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  (void)::setpgid(pid, pid);
  return HotplugProcess(pid, std::chrono::steady_clock::now() + timeout);
}

HotplugProcess::HotplugProcess(HotplugProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), deadline_(o.deadline_) {}

HotplugProcess& HotplugProcess::operator=(HotplugProcess&& o) noexcept {
  if (this != &o) {
    kill_and_reap();
    pid_ = std::exchange(o.pid_, -1);
    deadline_ = o.deadline_;
  }
  return *this;
}

HotplugProcess::~HotplugProcess() {
  kill_and_reap();
}

void HotplugProcess::kill_and_reap() {
  if (pid_ <= 0) return;
  // The script's group (it and its children); should that group be gone or not yet made, the
  // script itself: the wait below must never last as long as a hung script would.
  if (::kill(-pid_, SIGKILL) != 0) (void)::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::optional<HotplugOutcome> HotplugProcess::poll() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    if (WIFSIGNALED(status))
      return HotplugOutcome{HotplugOutcome::Kind::signalled, WTERMSIG(status)};
    return HotplugOutcome{HotplugOutcome::Kind::exited, WEXITSTATUS(status)};
  }
  if (std::chrono::steady_clock::now() >= deadline_) {
    kill_and_reap();
    return HotplugOutcome{HotplugOutcome::Kind::timed_out, 0};
  }
  return std::nullopt;
}

HotplugOutcome HotplugProcess::wait() {
  for (;;) {
    if (auto o = poll()) return *o;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<HotplugOutcome> run_hotplug_script(const HotplugCall& call,
                                          std::chrono::milliseconds timeout) {
  auto p = HotplugProcess::spawn(call, timeout);
  if (!p) return p.error();
  return p->wait();
}

}  // namespace unetback::hotplug
