// ServiceNotifier: unetbackd's side of systemd's Type=notify protocol (sd_notify(3)), through
// libsystemd. READY=1 once the daemon serves xenstore (main.cpp calls ready() from the
// manager loop after the first scan of backend/vif, the control socket already listening);
// then, if the unit has WatchdogSec= (sd_watchdog_enabled), WATCHDOG=1 every half interval
// from a timer on the manager's io_context, so a wedged manager loop stops feeding systemd,
// which kills and restarts the daemon. Outside systemd (no NOTIFY_SOCKET) nothing is sent.
// Built without libsystemd (meson -Dlibsystemd=disabled), enabled() is false and nothing is
// sent either: the daemon then suits Type=simple units only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <string_view>
#include <sys/types.h>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it

namespace unetback::daemon {

class ServiceNotifier {
 public:
  explicit ServiceNotifier(boost::asio::io_context& io);
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  /// Whether this build can notify systemd at all (libsystemd was found).
  [[nodiscard]] static bool enabled();

  /// READY=1 with STATUS=`status`, then starts feeding the watchdog if systemd asked for it.
  void ready(std::string_view status);
  /// STOPPING=1 (SIGTERM: closing every vif) and no more watchdog pings.
  void stopping();
  /// RELOADING=1 with STATUS=`status` (an upgrade in place: the same pid sends READY=1 again
  /// from its new image) and no more watchdog pings from this image.
  void reloading(std::string_view status);
  /// MAINPID=`pid`: another process of the unit (the successor) is its main process now.
  void main_pid(pid_t pid);

  /// The watchdog interval systemd asked for (WATCHDOG_USEC), zero if none.
  [[nodiscard]] std::chrono::microseconds watchdog_interval() const { return watchdog_; }

 private:
  void do_ping();

  boost::asio::steady_timer timer_;
  std::chrono::microseconds watchdog_{0};
  bool stopped_ = false;
};

}  // namespace unetback::daemon
