// unetbackd: the userspace Xen netback daemon. Opens the hypervisor, then runs the
// BackendManager and the control socket on one io_context until SIGTERM/SIGINT, when every
// vif is closed (state 6) before exit. Exit codes: see daemon_options.hpp and --help.
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <execinfo.h>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it
#include <variant>
#include <vector>

#include "backend/daemon/backend_manager.hpp"
#include "backend/daemon/control_handler.hpp"
#include "backend/daemon/control_server.hpp"
#include "backend/daemon/daemon_options.hpp"
#include "backend/daemon/fd_store.hpp"
#include "backend/daemon/instance_lock.hpp"
#include "backend/daemon/kernel_netback.hpp"
#include "backend/daemon/manager_loop.hpp"
#include "backend/daemon/private_dir.hpp"
#include "backend/daemon/reexec.hpp"
#include "backend/daemon/service_notifier.hpp"
#include "backend/daemon/systemd_job.hpp"
#include "backend/daemon/tunables.hpp"
#include "backend/vif/event_loop_pool.hpp"
#include "backend/vif/vif.hpp"
#include "common/hv/hypervisor.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"
#include "common/util/milestone.hpp"
#include "common/util/result.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace {

using namespace unetback;
using namespace unetback::daemon;

constexpr std::string_view kLog = "unetbackd";

/// SIGUSR1: one line per vif (states and summed counters), for an operator without
/// unetback-ctl at hand.
void log_vif_summary(const BackendManager& manager) {
  const auto vifs = manager.list();
  log::write(
      log::Level::info, kLog,
      "SIGUSR1: " + std::to_string(vifs.size()) + " vif(s), serving " + manager.backend_root());
  for (const auto& v : vifs) {
    std::uint64_t rx = 0, tx = 0;
    for (const auto& q : v.report.queues) {
      for (const auto& [name, value] : q.counters) {
        if (name == "rx_packets") rx += value;
        if (name == "tx_packets") tx += value;
      }
    }
    std::string line =
        "vif " + format_vif_id(v.id) + ": backend " +
        std::string(xenbus::state_name(v.view.backend)) + ", frontend " +
        (v.view.frontend ? std::string(xenbus::state_name(*v.view.frontend)) : std::string("?")) +
        ", " + (v.report.connected ? "connected" : "not connected") + ", " +
        std::to_string(v.report.queues.size()) + " queue(s), rx_packets " + std::to_string(rx) +
        ", tx_packets " + std::to_string(tx);
    log::write(log::Level::info, kLog, line);
  }
}

/// SIGHUP (a logrotate-style reload): re-read the tunables; the log is stderr, which the
/// supervisor rotates, so there is nothing to reopen. SIGUSR1: the vif summary. Waits again
/// after each, for the daemon's life.
void serve_operator_signals(boost::asio::signal_set& signals, TunableStore& tunables,
                            BackendManager& manager, DomId self) {
  signals.async_wait(
      [&signals, &tunables, &manager, self](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (signo == SIGHUP) {
          const std::size_t changed = tunables.reload();
          log::write(log::Level::info, kLog,
                     "SIGHUP: tunables re-read from " + tunables_dir(self) + " (" +
                         std::to_string(changed) + " changed)");
        } else if (signo == SIGUSR1) {
          log_vif_summary(manager);
        }
        serve_operator_signals(signals, tunables, manager, self);
      });
}

#if UNETBACKD_FAULT_INJECTION
/// Fault injection for the takeover tests, in a build with -Dfault_injection=true only:
/// UNETBACKD_DIE_AT_HANDOVER_STEP=N makes the daemon kill itself (SIGKILL, as a crash would)
/// when its handover reaches step N (1: signal taken, nothing done; 2: the first vif handed
/// over; 3: every vif handed over; 4: the owner node released, about to exit).
void die_at_handover_step(int step) {
  static const int die_at = [] {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): first called from main(), before any thread.
    const char* v = std::getenv("UNETBACKD_DIE_AT_HANDOVER_STEP");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (step <= 0 || die_at != step) return;
  log::write(log::Level::warn, kLog,
             "UNETBACKD_DIE_AT_HANDOVER_STEP: dying at handover step " + std::to_string(step));
  std::raise(SIGKILL);
}
#else
/// A package or a default build has no fault to inject: no environment variable is read.
void die_at_handover_step(int /*step*/) {}
#endif

/// Signals that must not kill the daemon before its handlers are installed (or at all).
void ignore_stray_signals() {
  // A control client that hangs up must cost an EPIPE, not the daemon.
  std::signal(SIGPIPE, SIG_IGN);
  // SIGUSR2 (hand over) is served once running; SIGHUP and SIGUSR1 are served once running
  // (serve_operator_signals). None of them may kill a daemon still starting up.
  std::signal(SIGUSR2, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  std::signal(SIGUSR1, SIG_IGN);
}

/// This process: what `status` reports and what an upgrade in place executes again.
struct Process {
  std::string program;  // program_path_now() at start
  std::vector<std::string> argv;
  std::string started;  // realtime_stamp() of main()
};

int run(const DaemonOptions& opts, const Process& process) {
  // Before the hypervisor is opened: with xen_netback loaded nothing here is safe to touch.
  if (auto why = kernel_netback_conflict(opts.hypervisor, opts.allow_kernel_netback, sysfs_root()))
    throw SetupError(*why);
  if (std::holds_alternative<hv::XenSpec>(opts.hypervisor) && opts.allow_kernel_netback &&
      kernel_netback_loaded(sysfs_root())) {
    log::write(log::Level::warn, kLog,
               "the kernel netback is loaded; starting anyway (--allow-kernel-netback)");
  }
  hv::HypervisorOptions hv_opts;
  hv_opts.role = hv::Role::backend;
  hv_opts.copy_batch = opts.tunables.copy_batch;
  hv_opts.domid = opts.backend_domid;
  // The TAP queues systemd kept for us (a restart, a crash), taken before anything could start
  // a child: they are close-on-exec from here on. Only with a state dir: without one no vif is
  // adopted, so nothing is kept either.
  std::unique_ptr<FdStore> fd_store;
  if (!opts.state_dir.empty()) fd_store = FdStore::from_environment();
  auto hypervisor = hv::open_hypervisor(opts.hypervisor, hv_opts);
  const DomId self = hypervisor->self();
  auto xs = hypervisor->open_xenstore();
  log_milestone("xenstore_connected");
  // One daemon per backend domain, claimed before anything reads or writes a vif. A takeover
  // has everything opened before it asks the old daemon to go: the gap is only the handover.
  boost::asio::io_context io;
  TunableStore tunables(*xs, self, opts.tunables, opts.explicit_tunables);
  // What an earlier run left in xenstore (`set threads 4`) sizes the data-path threads, so the
  // store is read before the pool is made; later changes apply to vifs made after them.
  std::optional<vif::EventLoopPool> loops;
  const auto start_tunables = [&] {
    if (auto ec = tunables.start())
      throw SetupError("cannot read " + tunables_dir(self) + ": " + ec.message());
    loops.emplace(tunables.current().threads);
    log_milestone("tunables_read");
  };
  // A successor reads them and starts its threads while the old daemon still serves (the
  // guests' gap is then only the handover and the adoption). Anyone else waits for the lock
  // first: a daemon that is refused must not write its command line's tunables over the
  // running one's.
  if (opts.takeover) start_tunables();
  const InstanceLock lock = opts.takeover ? InstanceLock::take_over(opts.lock_path, 30000)
                                          : InstanceLock::acquire(opts.lock_path);
  log_milestone("lock_taken");
  if (!opts.state_dir.empty()) {
    std::error_code mk;
    std::filesystem::create_directories(opts.state_dir, mk);
    if (mk)
      throw SetupError("cannot make the state directory " + opts.state_dir + ": " + mk.message());
    require_private_directory(opts.state_dir, "the state directory");
  }
  claim_owner_node(*xs, self);
  if (!opts.takeover) start_tunables();
  // Guests' connects must leave descriptors to the control plane (fd_reserve.hpp).
  FdReserve fd_reserve;
  BackendManager* manager_ptr = nullptr;
  // Runs on a data-path thread: only wake the manager, which reports the vif from here (XSA-90).
  vif::VifFactoryImpl factory(
      *hypervisor, *loops,
      [&io, &manager_ptr] {
        boost::asio::post(io, [&manager_ptr] {
          if (manager_ptr != nullptr) manager_ptr->check_vifs();
        });
      },
      opts.switch_uplinks, &fd_reserve, opts.state_dir, fd_store.get());
  BackendManager manager(*xs, self, factory, tunables,
                         [&hypervisor](DomId d) { return hypervisor->domain_exists(d); });
  manager_ptr = &manager;
  DaemonInfo info;
  info.pid = ::getpid();
  info.program = process.program;
  info.started = process.started;
  info.version = UNETBACK_VERSION;
  // Set below, once the loop and the notifier exist: the upgrade's own steps.
  std::function<void()> start_upgrade;
  bool stopping = false;  // a signal began the end of this image
  pid_t successor = 0;    // an upgrade's new process, until it takes over or fails
  info.upgrade = [&]() -> std::optional<std::string> {
    // With a state dir there is always an fd store (FdStore::from_environment).
    if (opts.state_dir.empty())
      return "needs a state directory (--state-dir): without state records no vif is adopted";
    if (process.program.empty()) return "the program file is unknown (/proc/self/exe unreadable)";
    if (::access(process.program.c_str(), X_OK) != 0)
      return "cannot execute " + process.program + ": " + std::system_category().message(errno);
    if (stopping) return "already stopping";
    if (successor != 0)
      return "already upgrading: pid " + std::to_string(successor) + " takes over";
    boost::asio::post(io, start_upgrade);
    return std::nullopt;
  };
  ControlServer control(
      io, opts.control_path,
      [&manager, &info](std::string_view line) { return handle_line(line, manager, &info); }, {},
      &fd_reserve);
  if (auto ec = manager.start()) {
    throw SetupError("cannot watch /local/domain/" + std::to_string(self.value()) +
                     "/backend/vif: " + ec.message());
  }
  // Adopted devices (found at start, served by an earlier daemon) get their hotplug script
  // re-run. On xensim the script reaches the world's xenstored through XENSTORED_PATH.
  std::string xenstored_path;
  if (const auto* world = hv::sim_world_dir(opts.hypervisor))
    xenstored_path = *world + "/dom" + std::to_string(self.value()) + ".sock";
  HotplugLauncher hotplug(xenstored_path);
  manager.set_hotplug_launcher(&hotplug);
  log_milestone("setup_done");
  // The vifs an earlier daemon served first: their guests wait for us.
  manager.adopt_found();
  ManagerLoop loop(io, manager, xs->watch_fd());
  bool xenstore_lost = false;
  loop.set_lost_handler([&](std::error_code ec) {
    // Deaf for good: no new vif, no removal, no tunable would ever reach us. Exit, so that a
    // supervisor restarts us; the new daemon adopts the vifs still online.
    log::write(log::Level::error, kLog,
               "lost the xenstore connection (" + ec.message() + "): exiting with status " +
                   std::to_string(kExitXenstoreLost) +
                   " so that a supervisor restarts unetbackd, which adopts the vifs");
    xenstore_lost = true;
    io.stop();
  });

  ServiceNotifier notifier(io);
  std::string serving;  // the status line systemd shows while this image serves
  // Ready (systemd's READY=1) only once the first scan of backend/vif is done: every vif
  // libxl wrote before is served, and the control socket already listens.
  loop.set_serving_handler([&] {
    serving = "serving " + manager.backend_root() + " as domain " + std::to_string(self.value()) +
              ", control socket " + control.path() + ", lock " + lock.path();
    log::write(log::Level::info, kLog, serving);
    log_milestone("serving");
    // What no vif of this daemon claims (a guest gone while no daemon ran) goes now.
    if (!opts.state_dir.empty()) {
      (void)vif::release_left_behind(opts.state_dir, manager.backend_root(),
                                     [&manager](DomId d, DevId v) {
                                       return !manager.left_behind(VifId{d, v});
                                     });
    }
    if (fd_store) fd_store->release_unclaimed();
    notifier.ready(serving);
  });

  // Every vif stopped between two passes, its record marked handed over, its TAP kept; nothing
  // else released. The image ends right after, by execve() (an upgrade in place) or _exit() (a
  // successor process): unmapping the rings, unbinding the ports and joining the threads call
  // after call would all fall into the guests' gap, and the kernel releases them at once, as
  // when a daemon dies (the crash path adopts from exactly that).
  const auto hand_over_all = [&](const std::string& why) {
    loop.stop();
    log::write(log::Level::info, kLog, why + ": handing every vif over to a successor");
    log_milestone("handover_requested");
    manager.hand_over(die_at_handover_step);
    log_milestone("handed_over");
  };
  // `unetback-ctl upgrade`: the successor is the program file started again with --takeover,
  // which sets up while this image serves and then asks for the handover (SIGUSR2, below).
  start_upgrade = [&] {
    if (stopping || successor != 0) return;
    log_milestone("upgrade_requested");
    std::vector<std::string> argv = process.argv;
    if (std::find(argv.begin(), argv.end(), "--takeover") == argv.end())
      argv.emplace_back("--takeover");
    auto child = spawn_with_fds(process.program, argv, fd_store->held());
    if (!child) {
      info.upgrade_error = "cannot start " + process.program + ": " + child.error().message();
      log::write(log::Level::error, kLog, "upgrade: " + info.upgrade_error + "; serving on");
      return;
    }
    successor = *child;
    info.upgrade_error.clear();
    log_milestone("successor_started", "successor=" + std::to_string(successor));
    log::write(log::Level::info, kLog,
               "upgrade: started " + process.program + " (pid " + std::to_string(successor) +
                   ") to take over; serving until it asks for the handover");
    notifier.reloading("upgrading: " + process.program + " (pid " + std::to_string(successor) +
                       ") takes over");
  };
  // A successor that ends before it took over (a new binary that cannot start, a lock it
  // could not get): this image serves on, ready again.
  boost::asio::signal_set children(io, SIGCHLD);
  std::function<void()> watch_children = [&] {
    children.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      int st = 0;
      if (successor != 0 && ::waitpid(successor, &st, WNOHANG) == successor) {
        const pid_t failed = std::exchange(successor, 0);
        info.upgrade_error =
            "the successor " + process.program + " (pid " + std::to_string(failed) + ") " +
            (WIFEXITED(st)     ? "exited with status " + std::to_string(WEXITSTATUS(st))
             : WIFSIGNALED(st) ? "died of signal " + std::to_string(WTERMSIG(st))
                               : "ended") +
            " before it took over";
        log::write(log::Level::error, kLog,
                   "upgrade failed: " + info.upgrade_error + "; this daemon serves on");
        if (!stopping) notifier.ready(serving);
      }
      watch_children();
    });
  };
  watch_children();
  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGUSR2);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    log_milestone("signal_seen", signo == SIGUSR2   ? "signal=USR2"
                                 : signo == SIGTERM ? "signal=TERM"
                                                    : "signal=INT");
    if (std::exchange(stopping, true)) return;  // an upgrade came first
    // SIGUSR2 (--takeover, an upgrade's successor, `systemctl kill -s USR2`), or SIGTERM while
    // systemd restarts the unit: hand over. Any other SIGTERM or SIGINT is an orderly stop.
    const bool restart = signo == SIGUSR2 ||
                         (signo == SIGTERM && !opts.state_dir.empty() && systemd_restarting_us());
    // An upgrade's successor becomes the unit's main process: the unit does not stop.
    int st = 0;
    const bool to_successor =
        signo == SIGUSR2 && successor != 0 && ::waitpid(successor, &st, WNOHANG) == 0;
    if (!to_successor) notifier.stopping();
    if (restart) {
      hand_over_all(signo == SIGUSR2 ? "SIGUSR2" : "SIGTERM (unit restarting)");
      // A successor polls the lock, which the exit releases; the owner node goes first (a
      // zombie still answers kill(pid, 0)).
      release_owner_node(*xs, self);
      if (to_successor) {
        notifier.main_pid(successor);
        log_milestone("main_pid", "successor=" + std::to_string(successor));
      }
      die_at_handover_step(4);
      log::write(log::Level::info, kLog, "handed over");
      log_milestone("exit", "status=" + std::to_string(kExitHandedOver));
      ::_exit(kExitHandedOver);
    } else {
      loop.stop();
      log::write(log::Level::info, kLog,
                 std::string(signo == SIGTERM ? "SIGTERM" : "SIGINT") + ": closing every vif");
      manager.shutdown();
    }
    io.stop();
  });

  boost::asio::signal_set operator_signals(io, SIGHUP, SIGUSR1);
  serve_operator_signals(operator_signals, tunables, manager, self);

  loop.start();
  io.run();
  if (xenstore_lost) return kExitXenstoreLost;
  release_owner_node(*xs, self);
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
    log::write(log::Level::warn, kLog, "cannot raise RLIMIT_NOFILE: " + lim.error().message());
  try {
    const int status = run(opts, process);
    // After every destructor of run(): the vifs, the data-path threads, the lock released.
    log_milestone("exit", "status=" + std::to_string(status));
    return status;
  } catch (const SetupError& e) {
    log::write(log::Level::error, kLog, e.what());
    return kExitSetup;
  } catch (const std::exception& e) {
    log::write(log::Level::error, kLog, std::string("unexpected error: ") + e.what());
    return kExitSetup;
  }
}
