// unetbackd: the userspace Xen netback daemon. main() parses the command line, installs the
// crash handler and sets the log up; the daemon's life (claim, adopt, serve, hand over, exit)
// is the Daemon's (daemon.hpp). Exit codes: see daemon_options.hpp and --help.
#include <csignal>
#include <exception>
#include <execinfo.h>
#include <iostream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <variant>
#include <vector>

#include "backend/daemon/daemon.hpp"
#include "backend/daemon/daemon_options.hpp"
#include "backend/daemon/reexec.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"
#include "common/util/milestone.hpp"
#include "common/util/result.hpp"

namespace {

using namespace unetback;
using namespace unetback::daemon;

constexpr std::string_view kMainLog = "unetbackd";

/// Signals that must not kill the daemon before its handlers are installed (or at all).
void ignore_stray_signals() {
  // A control client that hangs up must cost an EPIPE, not the daemon.
  std::signal(SIGPIPE, SIG_IGN);
  // SIGUSR2 (hand over) is served once running; SIGHUP and SIGUSR1 are served once running
  // (Daemon::serve). None of them may kill a daemon still starting up.
  std::signal(SIGUSR2, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  std::signal(SIGUSR1, SIG_IGN);
}

/// The daemon's life (backend/daemon/daemon.hpp); every member is destroyed on return: the
/// vifs, the data-path threads, the lock released.
int run(const DaemonOptions& opts, const Process& process) {
  Daemon daemon(opts, process);
  return daemon.run();
}

/// A crash leaves its stack in the log (binary+offset per frame: `addr2line -e unetbackd
/// OFFSET` on the build host names the line), then dies of the same signal (core, exit code).
extern "C" void on_fatal_signal(int signo) {
  static constexpr char kMsg[] = "unetbackd: fatal signal, backtrace:\n";
  (void)!::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(signo, SIG_DFL);
  std::raise(signo);
}

void install_crash_handler() {
  // backtrace() loads libgcc's unwinder on first use (which allocates): do it now, not in
  // the handler.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // they report crashes better
  void* warm[1];
  (void)::backtrace(warm, 1);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(s, on_fatal_signal);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // The process's start as the lab lines it up with a guest's pings (logged once the log is set).
  const std::string entered = realtime_stamp();
  const Process process{program_path_now(), std::vector<std::string>(argv, argv + argc), entered};
  ignore_stray_signals();
  die_at_handover_step(0);  // a fault-injection build reads its variable now, before any thread
  install_crash_handler();
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = parse_daemon_args(args);
  const auto* parsed_opts = std::get_if<DaemonOptions>(&parsed);
  if (parsed_opts == nullptr) {
    std::cerr << "unetbackd: " << *std::get_if<std::string>(&parsed)
              << "\n(try unetbackd --help)\n";
    return kExitUsage;
  }
  const DaemonOptions& opts = *parsed_opts;
  if (opts.help) {
    std::cout << daemon_usage();
    return kExitOk;
  }
  log::set_level(opts.log_level);
  // Under systemd stderr is the journal: each line then carries its syslog priority.
  log::use_journal_if_connected();
  log_milestone("main_entered", {}, entered);
  // Every guest's connect costs descriptors: use what the hard limit allows (systemd starts
  // services at a soft 1024; LimitNOFILE= in the unit sets the hard one).
  if (auto lim = raise_fd_limit(); !lim)
    log::write(log::Level::warn, kMainLog, "cannot raise RLIMIT_NOFILE: " + lim.error().message());
  try {
    const int status = run(opts, process);
    // After every destructor of run(): the vifs, the data-path threads, the lock released.
    log_milestone("exit", "status=" + std::to_string(status));
    return status;
  } catch (const SetupError& e) {
    log::write(log::Level::error, kMainLog, e.what());
    return kExitSetup;
  } catch (const std::exception& e) {
    log::write(log::Level::error, kMainLog, std::string("unexpected error: ") + e.what());
    return kExitSetup;
  }
}
