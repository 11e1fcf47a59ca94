// ManagerLoop: runs a BackendManager on a Boost.Asio io_context (the daemon's main thread):
// waits for XenStore::watch_fd() to become readable and hands the events over, and checks the
// vifs periodically, because a data path disables a vif without any xenstore event.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it

#include "backend/daemon/backend_manager.hpp"

namespace unetback::daemon {

class ManagerLoop {
 public:
  /// `watch_fd` stays owned by the XenStore connection; it must outlive this object.
  ManagerLoop(boost::asio::io_context& io, BackendManager& manager, int watch_fd,
              std::chrono::milliseconds check_interval = std::chrono::milliseconds(200));
  /// Stops waiting and gives the fd back (it is never closed here).
  ~ManagerLoop();
  ManagerLoop(const ManagerLoop&) = delete;
  ManagerLoop& operator=(const ManagerLoop&) = delete;

  /// Handles what is already queued, then waits for more.
  void start();
  /// Cancels the waits; the manager is left as it is (call its shutdown() separately).
  void stop();

 private:
  void do_wait();
  void do_check();

  BackendManager& manager_;
  boost::asio::posix::stream_descriptor watch_;
  boost::asio::steady_timer check_timer_;
  std::chrono::milliseconds check_interval_;
  bool stopped_ = false;
};

}  // namespace unetback::daemon
