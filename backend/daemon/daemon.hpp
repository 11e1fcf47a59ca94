// Daemon: unetbackd's life, one backend domain's, in the phases it goes through (run()):
//
//  * claim: the kernel-netback check, the TAP queues systemd kept (the fd store), the
//    hypervisor and xenstore, the tunables and the event-loop threads, the instance lock (a
//    successor reads the tunables and starts its threads before it asks for the lock, anyone
//    else after it has it), the state directory, the owner node;
//  * adopt: the vif factory, the BackendManager, the control socket, the backend/vif watch,
//    the hotplug launcher, then the vifs an earlier daemon served (BackendManager::adopt_found);
//  * serve: the manager loop (READY=1 once the first scan is done), the stop, handover and
//    operator signals, `unetback-ctl upgrade` and the watch of its successor, until the
//    io_context stops;
//  * hand over (SIGUSR2, or SIGTERM while systemd restarts the unit): every vif handed over,
//    the owner node released, the successor named the unit's main process, exit 4 at once;
//  * exit: after an orderly stop (every vif closed) or a lost xenstore connection, the status.
//
// The members are what those phases share, declared in the order the phases make them: they
// are destroyed in reverse (the control socket and the vifs before the data-path threads,
// the lock after them), and everything is gone once the Daemon is.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <system_error>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it
#include <vector>

#include "backend/daemon/backend_manager.hpp"
#include "backend/daemon/control_handler.hpp"
#include "backend/daemon/control_server.hpp"
#include "backend/daemon/daemon_options.hpp"
#include "backend/daemon/fd_store.hpp"
#include "backend/daemon/hotplug_launcher.hpp"
#include "backend/daemon/instance_lock.hpp"
#include "backend/daemon/manager_loop.hpp"
#include "backend/daemon/service_notifier.hpp"
#include "backend/daemon/tunables.hpp"
#include "backend/vif/vif.hpp"
#include "common/event/event_loop_pool.hpp"
#include "common/hv/hypervisor.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::daemon {

/// This process: what `status` reports and what an upgrade in place executes again.
struct Process {
  std::string program;  // program_path_now() at start
  std::vector<std::string> argv;
  std::string started;  // realtime_stamp() of main()
};

/// Fault injection for the takeover tests, in a build with -Dfault_injection=true only:
/// UNETBACKD_DIE_AT_HANDOVER_STEP=N makes the daemon kill itself (SIGKILL, as a crash would)
/// when its handover reaches step N (1: signal taken, nothing done; 2: the first vif handed
/// over; 3: every vif handed over; 4: the owner node released, about to exit). Step 0 reads the
/// variable (main() does it before any thread). Without fault injection it does nothing.
void die_at_handover_step(int step);

class Daemon {
 public:
  /// Nothing happens until run(). `opts` and `process` must outlive the Daemon.
  Daemon(const DaemonOptions& opts, const Process& process);
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// claim, adopt, serve, then exit: the exit status (daemon_options.hpp). A handover ends the
  /// process from inside serve (exit status 4). SetupError when a step of the set-up fails.
  int run();

 private:
  // The phases, in order.
  void claim();
  void adopt();
  void serve();
  /// Every vif handed over to a successor, the owner node released, exit 4: never returns.
  [[noreturn]] void hand_over(const std::string& why, bool to_successor);
  /// After io_.run(): the exit status of an orderly stop or of a lost xenstore connection.
  int exit();

  // claim
  void start_tunables();
  void make_state_dir();
  // adopt
  [[nodiscard]] std::optional<std::string> upgrade_refusal() const;
  // serve
  void on_serving();
  void on_xenstore_lost(std::error_code ec);
  void on_stop_signal(int signo);
  void start_upgrade();
  void watch_successor();
  void reap_successor();
  // exit
  void stop(int signo);

  const DaemonOptions& opts_;
  const Process& process_;

  // claim
  std::unique_ptr<FdStore> fd_store_;
  std::unique_ptr<hv::Hypervisor> hypervisor_;
  DomId self_;
  std::unique_ptr<hv::XenStore> xs_;
  boost::asio::io_context io_;
  std::optional<TunableStore> tunables_;
  std::optional<event::EventLoopPool> loops_;
  std::optional<InstanceLock> lock_;

  // adopt
  /// Guests' connects must leave descriptors to the control plane (fd_reserve.hpp).
  std::optional<FdReserve> fd_reserve_;
  std::optional<vif::VifFactoryImpl> factory_;
  std::optional<BackendManager> manager_;
  DaemonInfo info_;
  bool stopping_ = false;  // a signal began the end of this image
  pid_t successor_ = 0;    // an upgrade's new process, until it takes over or fails
  std::optional<ControlServer> control_;
  std::optional<HotplugLauncher> hotplug_;

  // serve
  std::optional<ManagerLoop> loop_;
  bool xenstore_lost_ = false;
  std::optional<ServiceNotifier> notifier_;
  std::string serving_;  // the status line systemd shows while this image serves
  std::optional<boost::asio::signal_set> children_;
  std::optional<boost::asio::signal_set> stop_signals_;
  std::optional<boost::asio::signal_set> operator_signals_;
};

}  // namespace unetback::daemon
