// unetbackd: the userspace Xen netback daemon. Opens the hypervisor, then runs the
// BackendManager and the control socket on one io_context until SIGTERM/SIGINT, when every
// vif is closed (state 6) before exit. Exit codes: see daemon_options.hpp and --help.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <execinfo.h>
#include <iostream>
#include <string_view>
#include <unistd.h>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it
#include <vector>

#include "backend/daemon/backend_manager.hpp"
#include "backend/daemon/control_handler.hpp"
#include "backend/daemon/control_server.hpp"
#include "backend/daemon/daemon_options.hpp"
#include "backend/daemon/manager_loop.hpp"
#include "backend/daemon/tunables.hpp"
#include "backend/vif/event_loop_pool.hpp"
#include "backend/vif/vif.hpp"
#include "common/hv/hypervisor.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace {

using namespace unetback;
using namespace unetback::daemon;

constexpr std::string_view kLog = "unetbackd";

int run(const DaemonOptions& opts) {
  hv::HypervisorOptions hv_opts;
  hv_opts.role = hv::Role::backend;
  hv_opts.copy_batch = opts.tunables.copy_batch;
  hv_opts.domid = opts.backend_domid;
  auto hypervisor = hv::open_hypervisor(opts.hypervisor, hv_opts);
  const DomId self = hypervisor->self();
  auto xs = hypervisor->open_xenstore();

  boost::asio::io_context io;
  TunableStore tunables(*xs, self, opts.tunables, opts.explicit_tunables);
  // What an earlier run left in xenstore (`set threads 4`) sizes the data-path threads, so the
  // store is read before the pool is made; later changes apply to vifs made after them.
  if (auto ec = tunables.start())
    throw SetupError("cannot read " + tunables_dir(self) + ": " + ec.message());
  vif::EventLoopPool loops(tunables.current().threads);
  // Guests' connects must leave descriptors to the control plane (fd_reserve.hpp).
  FdReserve fd_reserve;
  BackendManager* manager_ptr = nullptr;
  // Runs on a data-path thread: only wake the manager, which reports the vif from here (XSA-90).
  vif::VifFactoryImpl factory(
      *hypervisor, loops,
      [&io, &manager_ptr] {
        boost::asio::post(io, [&manager_ptr] {
          if (manager_ptr != nullptr) manager_ptr->check_vifs();
        });
      },
      opts.switch_uplinks, &fd_reserve);
  BackendManager manager(*xs, self, factory, tunables,
                         [&hypervisor](DomId d) { return hypervisor->domain_exists(d); });
  manager_ptr = &manager;
  ControlServer control(
      io, opts.control_path,
      [&manager](std::string_view line) { return handle_line(line, manager); }, {}, &fd_reserve);
  if (auto ec = manager.start())
    throw SetupError("cannot watch /local/domain/" + std::to_string(self.value()) +
                     "/backend/vif: " + ec.message());
  // Adopted devices (found at start, served by an earlier daemon) get their hotplug script
  // re-run. On xensim the script reaches the world's xenstored through XENSTORED_PATH.
  std::string xenstored_path;
  if (opts.hypervisor.starts_with("sim:"))
    xenstored_path = opts.hypervisor.substr(4) + "/dom" + std::to_string(self.value()) + ".sock";
  HotplugLauncher hotplug(xenstored_path);
  manager.set_hotplug_launcher(&hotplug);
  ManagerLoop loop(io, manager, xs->watch_fd());

  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    log::write(log::Level::info, kLog,
               std::string(signo == SIGTERM ? "SIGTERM" : "SIGINT") + ": closing every vif");
    loop.stop();
    manager.shutdown();
    io.stop();
  });

  loop.start();
  log::write(log::Level::info, kLog,
             "serving " + manager.backend_root() + " as domain " + std::to_string(self.value()) +
                 ", control socket " + control.path());
  io.run();
  log::write(log::Level::info, kLog, "stopped");
  return kExitOk;
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
  // A control client that hangs up must cost an EPIPE, not the daemon.
  std::signal(SIGPIPE, SIG_IGN);
  install_crash_handler();
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto parsed = parse_daemon_args(args);
  if (auto* msg = std::get_if<std::string>(&parsed)) {
    std::cerr << "unetbackd: " << *msg << "\n(try unetbackd --help)\n";
    return kExitUsage;
  }
  const auto& opts = std::get<DaemonOptions>(parsed);
  if (opts.help) {
    std::cout << daemon_usage();
    return kExitOk;
  }
  log::set_level(opts.log_level);
  // Every guest's connect costs descriptors: use what the hard limit allows (systemd starts
  // services at a soft 1024; LimitNOFILE= in the unit sets the hard one).
  if (auto lim = raise_fd_limit(); !lim)
    log::write(log::Level::warn, kLog, "cannot raise RLIMIT_NOFILE: " + lim.error().message());
  try {
    return run(opts);
  } catch (const SetupError& e) {
    log::write(log::Level::error, kLog, e.what());
    return kExitSetup;
  } catch (const std::exception& e) {
    log::write(log::Level::error, kLog, std::string("unexpected error: ") + e.what());
    return kExitSetup;
  }
}
