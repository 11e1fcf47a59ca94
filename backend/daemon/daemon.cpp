#include "backend/daemon/daemon.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <variant>

#include "backend/daemon/kernel_netback.hpp"
#include "backend/daemon/private_dir.hpp"
#include "backend/daemon/reexec.hpp"
#include "backend/daemon/systemd_job.hpp"
#include "common/util/log.hpp"
#include "common/util/milestone.hpp"
#include "common/util/result.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace unetback::daemon {

namespace {

constexpr std::string_view kDaemonLog = "unetbackd";

/// SIGUSR1: one line per vif (states and summed counters), for an operator without
/// unetback-ctl at hand.
void log_vif_summary(const BackendManager& manager) {
  const auto vifs = manager.list();
  log::write(
      log::Level::info, kDaemonLog,
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
    log::write(log::Level::info, kDaemonLog, line);
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
          log::write(log::Level::info, kDaemonLog,
                     "SIGHUP: tunables re-read from " + tunables_dir(self) + " (" +
                         std::to_string(changed) + " changed)");
        } else if (signo == SIGUSR1) {
          log_vif_summary(manager);
        }
        serve_operator_signals(signals, tunables, manager, self);
      });
}

}  // namespace

#if UNETBACKD_FAULT_INJECTION
void die_at_handover_step(int step) {
  static const int die_at = [] {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): first called from main(), before any thread.
    const char* v = std::getenv("UNETBACKD_DIE_AT_HANDOVER_STEP");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (step <= 0 || die_at != step) return;
  log::write(log::Level::warn, kDaemonLog,
             "UNETBACKD_DIE_AT_HANDOVER_STEP: dying at handover step " + std::to_string(step));
  std::raise(SIGKILL);
}
#else
/// A package or a default build has no fault to inject: no environment variable is read.
void die_at_handover_step(int /*step*/) {}
#endif

Daemon::Daemon(const DaemonOptions& opts, const Process& process)
    : opts_(opts), process_(process) {}

int Daemon::run() {
  claim();
  adopt();
  serve();
  return exit();
}

// ---- claim ----

void Daemon::claim() {
  // Before the hypervisor is opened: with xen_netback loaded nothing here is safe to touch.
  if (auto why =
          kernel_netback_conflict(opts_.hypervisor, opts_.allow_kernel_netback, sysfs_root()))
    throw SetupError(*why);
  if (std::holds_alternative<hv::XenSpec>(opts_.hypervisor) && opts_.allow_kernel_netback &&
      kernel_netback_loaded(sysfs_root())) {
    log::write(log::Level::warn, kDaemonLog,
               "the kernel netback is loaded; starting anyway (--allow-kernel-netback)");
  }
  hv::HypervisorOptions hv_opts;
  hv_opts.role = hv::Role::backend;
  hv_opts.copy_batch = opts_.tunables.copy_batch;
  hv_opts.domid = opts_.backend_domid;
  // The TAP queues systemd kept for us (a restart, a crash), taken before anything could start
  // a child: they are close-on-exec from here on. Only with a state dir: without one no vif is
  // adopted, so nothing is kept either.
  if (!opts_.state_dir.empty()) fd_store_ = FdStore::from_environment();
  hypervisor_ = hv::open_hypervisor(opts_.hypervisor, hv_opts);
  self_ = hypervisor_->self();
  xs_ = hypervisor_->open_xenstore();
  log_milestone("xenstore_connected");
  // One daemon per backend domain, claimed before anything reads or writes a vif. A takeover
  // has everything opened before it asks the old daemon to go: the gap is only the handover.
  tunables_.emplace(*xs_, self_, opts_.tunables, opts_.explicit_tunables);
  // A successor reads them and starts its threads while the old daemon still serves (the
  // guests' gap is then only the handover and the adoption). Anyone else waits for the lock
  // first: a daemon that is refused must not write its command line's tunables over the
  // running one's.
  if (opts_.takeover) start_tunables();
  lock_.emplace(opts_.takeover ? InstanceLock::take_over(opts_.lock_path, 30000)
                               : InstanceLock::acquire(opts_.lock_path));
  log_milestone("lock_taken");
  make_state_dir();
  claim_owner_node(*xs_, self_);
  if (!opts_.takeover) start_tunables();
}

void Daemon::start_tunables() {
  // What an earlier run left in xenstore (`set threads 4`) sizes the data-path threads, so the
  // store is read before the pool is made; later changes apply to vifs made after them.
  if (auto ec = tunables_->start())
    throw SetupError("cannot read " + tunables_dir(self_) + ": " + ec.message());
  loops_.emplace(tunables_->current().threads);
  log_milestone("tunables_read");
}

void Daemon::make_state_dir() {
  if (opts_.state_dir.empty()) return;
  std::error_code mk;
  std::filesystem::create_directories(opts_.state_dir, mk);
  if (mk)
    throw SetupError("cannot make the state directory " + opts_.state_dir + ": " + mk.message());
  require_private_directory(opts_.state_dir, "the state directory");
}

// ---- adopt ----

void Daemon::adopt() {
  fd_reserve_.emplace();
  // Runs on a data-path thread: only wake the manager, which reports the vif from here (XSA-90).
  factory_.emplace(
      *hypervisor_, *loops_,
      [this] {
        boost::asio::post(io_, [this] {
          if (manager_) manager_->check_vifs();
        });
      },
      opts_.switch_uplinks, &*fd_reserve_, opts_.state_dir, fd_store_.get());
  manager_.emplace(*xs_, self_, *factory_, *tunables_,
                   [this](DomId d) { return hypervisor_->domain_exists(d); });
  info_.pid = ::getpid();
  info_.program = process_.program;
  info_.started = process_.started;
  info_.version = UNETBACK_VERSION;
  info_.upgrade = [this]() -> std::optional<std::string> {
    if (auto why = upgrade_refusal()) return why;
    boost::asio::post(io_, [this] { start_upgrade(); });
    return std::nullopt;
  };
  control_.emplace(
      io_, opts_.control_path,
      [this](std::string_view line) { return handle_line(line, *manager_, &info_); },
      ControlServer::Limits{}, &*fd_reserve_);
  if (auto ec = manager_->start()) {
    throw SetupError("cannot watch /local/domain/" + std::to_string(self_.value()) +
                     "/backend/vif: " + ec.message());
  }
  // Adopted devices (found at start, served by an earlier daemon) get their hotplug script
  // re-run. On xensim the script reaches the world's xenstored through XENSTORED_PATH.
  std::string xenstored_path;
  if (const auto* world = hv::sim_world_dir(opts_.hypervisor))
    xenstored_path = *world + "/dom" + std::to_string(self_.value()) + ".sock";
  hotplug_.emplace(xenstored_path);
  manager_->set_hotplug_launcher(&*hotplug_);
  log_milestone("setup_done");
  // The vifs an earlier daemon served first: their guests wait for us.
  manager_->adopt_found();
}

/// Why `unetback-ctl upgrade` cannot start now, if it cannot.
std::optional<std::string> Daemon::upgrade_refusal() const {
  // With a state dir there is always an fd store (FdStore::from_environment).
  if (opts_.state_dir.empty())
    return "needs a state directory (--state-dir): without state records no vif is adopted";
  if (process_.program.empty()) return "the program file is unknown (/proc/self/exe unreadable)";
  if (::access(process_.program.c_str(), X_OK) != 0)
    return "cannot execute " + process_.program + ": " + std::system_category().message(errno);
  if (stopping_) return "already stopping";
  if (successor_ != 0)
    return "already upgrading: pid " + std::to_string(successor_) + " takes over";
  return std::nullopt;
}

// ---- serve ----

void Daemon::serve() {
  loop_.emplace(io_, *manager_, xs_->watch_fd());
  loop_->set_lost_handler([this](std::error_code ec) { on_xenstore_lost(ec); });
  notifier_.emplace(io_);
  loop_->set_serving_handler([this] { on_serving(); });
  // A successor that ends before it took over (a new binary that cannot start, a lock it
  // could not get): this image serves on, ready again.
  children_.emplace(io_, SIGCHLD);
  watch_successor();
  stop_signals_.emplace(io_, SIGTERM, SIGINT, SIGUSR2);
  stop_signals_->async_wait([this](const boost::system::error_code& ec, int signo) {
    if (!ec) on_stop_signal(signo);
  });
  operator_signals_.emplace(io_, SIGHUP, SIGUSR1);
  serve_operator_signals(*operator_signals_, *tunables_, *manager_, self_);

  loop_->start();
  io_.run();
}

void Daemon::on_xenstore_lost(std::error_code ec) {
  // Deaf for good: no new vif, no removal, no tunable would ever reach us. Exit, so that a
  // supervisor restarts us; the new daemon adopts the vifs still online.
  log::write(log::Level::error, kDaemonLog,
             "lost the xenstore connection (" + ec.message() + "): exiting with status " +
                 std::to_string(kExitXenstoreLost) +
                 " so that a supervisor restarts unetbackd, which adopts the vifs");
  xenstore_lost_ = true;
  io_.stop();
}

/// Ready (systemd's READY=1) only once the first scan of backend/vif is done: every vif
/// libxl wrote before is served, and the control socket already listens.
void Daemon::on_serving() {
  serving_ = "serving " + manager_->backend_root() + " as domain " + std::to_string(self_.value()) +
             ", control socket " + control_->path() + ", lock " + lock_->path();
  log::write(log::Level::info, kDaemonLog, serving_);
  log_milestone("serving");
  // What no vif of this daemon claims (a guest gone while no daemon ran) goes now.
  if (!opts_.state_dir.empty()) {
    (void)vif::release_left_behind(opts_.state_dir, manager_->backend_root(),
                                   [this](DomId d, DevId v) {
                                     return !manager_->left_behind(VifId{d, v});
                                   });
  }
  if (fd_store_) fd_store_->release_unclaimed();
  notifier_->ready(serving_);
}

/// SIGUSR2 (--takeover, an upgrade's successor, `systemctl kill -s USR2`), or SIGTERM while
/// systemd restarts the unit: hand over. Any other SIGTERM or SIGINT is an orderly stop.
void Daemon::on_stop_signal(int signo) {
  log_milestone("signal_seen", signo == SIGUSR2   ? "signal=USR2"
                               : signo == SIGTERM ? "signal=TERM"
                                                  : "signal=INT");
  if (std::exchange(stopping_, true)) return;  // an upgrade came first
  const bool restart =
      signo == SIGUSR2 || (signo == SIGTERM && !opts_.state_dir.empty() && systemd_restarting_us());
  // An upgrade's successor becomes the unit's main process: the unit does not stop.
  int st = 0;
  const bool to_successor =
      signo == SIGUSR2 && successor_ != 0 && ::waitpid(successor_, &st, WNOHANG) == 0;
  if (!to_successor) notifier_->stopping();
  if (restart) hand_over(signo == SIGUSR2 ? "SIGUSR2" : "SIGTERM (unit restarting)", to_successor);
  stop(signo);
  io_.stop();
}

/// `unetback-ctl upgrade`: the successor is the program file started again with --takeover,
/// which sets up while this image serves and then asks for the handover (SIGUSR2).
void Daemon::start_upgrade() {
  if (stopping_ || successor_ != 0) return;
  log_milestone("upgrade_requested");
  std::vector<std::string> argv = process_.argv;
  if (std::find(argv.begin(), argv.end(), "--takeover") == argv.end())
    argv.emplace_back("--takeover");
  auto child = spawn_with_fds(process_.program, argv, fd_store_->held());
  if (!child) {
    info_.upgrade_error = "cannot start " + process_.program + ": " + child.error().message();
    log::write(log::Level::error, kDaemonLog, "upgrade: " + info_.upgrade_error + "; serving on");
    return;
  }
  successor_ = *child;
  info_.upgrade_error.clear();
  log_milestone("successor_started", "successor=" + std::to_string(successor_));
  log::write(log::Level::info, kDaemonLog,
             "upgrade: started " + process_.program + " (pid " + std::to_string(successor_) +
                 ") to take over; serving until it asks for the handover");
  notifier_->reloading("upgrading: " + process_.program + " (pid " + std::to_string(successor_) +
                       ") takes over");
}

void Daemon::watch_successor() {
  children_->async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    reap_successor();
    watch_successor();
  });
}

/// The successor ended before it took over: this image serves on, ready again.
void Daemon::reap_successor() {
  int st = 0;
  if (successor_ == 0 || ::waitpid(successor_, &st, WNOHANG) != successor_) return;
  const pid_t failed = std::exchange(successor_, 0);
  info_.upgrade_error = "the successor " + process_.program + " (pid " + std::to_string(failed) +
                        ") " +
                        (WIFEXITED(st)     ? "exited with status " + std::to_string(WEXITSTATUS(st))
                         : WIFSIGNALED(st) ? "died of signal " + std::to_string(WTERMSIG(st))
                                           : "ended") +
                        " before it took over";
  log::write(log::Level::error, kDaemonLog,
             "upgrade failed: " + info_.upgrade_error + "; this daemon serves on");
  if (!stopping_) notifier_->ready(serving_);
}

// ---- hand over ----

// Every vif stopped between two passes, its record marked handed over, its TAP kept; nothing
// else released. The image ends right after, by execve() (an upgrade in place) or _exit() (a
// successor process): unmapping the rings, unbinding the ports and joining the threads call
// after call would all fall into the guests' gap, and the kernel releases them at once, as
// when a daemon dies (the crash path adopts from exactly that).
void Daemon::hand_over(const std::string& why, bool to_successor) {
  loop_->stop();
  log::write(log::Level::info, kDaemonLog, why + ": handing every vif over to a successor");
  log_milestone("handover_requested");
  manager_->hand_over(die_at_handover_step);
  log_milestone("handed_over");
  // A successor polls the lock, which the exit releases; the owner node goes first (a
  // zombie still answers kill(pid, 0)).
  release_owner_node(*xs_, self_);
  if (to_successor) {
    notifier_->main_pid(successor_);
    log_milestone("main_pid", "successor=" + std::to_string(successor_));
  }
  die_at_handover_step(4);
  log::write(log::Level::info, kDaemonLog, "handed over");
  log_milestone("exit", "status=" + std::to_string(kExitHandedOver));
  ::_exit(kExitHandedOver);
}

// ---- exit ----

/// An orderly stop (SIGTERM, SIGINT): every vif closed (state 6 written, TAP gone).
void Daemon::stop(int signo) {
  loop_->stop();
  log::write(log::Level::info, kDaemonLog,
             std::string(signo == SIGTERM ? "SIGTERM" : "SIGINT") + ": closing every vif");
  manager_->shutdown();
}

int Daemon::exit() {
  if (xenstore_lost_) return kExitXenstoreLost;
  release_owner_node(*xs_, self_);
  log::write(log::Level::info, kDaemonLog, "stopped");
  return kExitOk;
}

}  // namespace unetback::daemon
