// ManagerLoop: runs a BackendManager on a Boost.Asio io_context (the daemon's main thread):
// waits for XenStore::watch_fd() to become readable and hands the events over in bounded
// rounds (the next round is posted behind whatever else the io_context has to do, so the
// control socket and the timers get their turn during a flood), and checks the vifs
// periodically, because a data path disables a vif without any xenstore event. The same check
// notices a xenstore connection that died (no event says so) and reports it once.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <system_error>
#include <utility>  // std::exchange, which Boost 1.74 Asio uses without including it

#include "backend/daemon/backend_manager.hpp"

namespace unetback::daemon {

class ManagerLoop {
 public:
  /// Called once when the xenstore connection is gone for good (the loop has stopped).
  using LostHandler = std::function<void(std::error_code)>;

  /// `watch_fd` stays owned by the XenStore connection; it must outlive this object.
  ManagerLoop(boost::asio::io_context& io, BackendManager& manager, int watch_fd,
              std::chrono::milliseconds check_interval = std::chrono::milliseconds(200));
  void set_lost_handler(LostHandler h) { on_lost_ = std::move(h); }
  /// Called once, after the round in which the manager finished its first scan of backend/vif
  /// (BackendManager::initial_scan_done): the daemon serves xenstore from then on.
  void set_serving_handler(std::function<void()> h) { on_serving_ = std::move(h); }
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
  void do_round();
  void do_check();
  /// True (and the loop stopped, the handler called) once the connection is gone.
  bool check_lost();
  /// Calls the serving handler once the first scan is done.
  void check_serving();

  boost::asio::io_context& io_;
  BackendManager& manager_;
  boost::asio::posix::stream_descriptor watch_;
  boost::asio::steady_timer check_timer_;
  std::chrono::milliseconds check_interval_;
  bool stopped_ = false;
  bool round_posted_ = false;
  std::uint64_t wait_gen_ = 0;
  LostHandler on_lost_;
  std::function<void()> on_serving_;
};

}  // namespace unetback::daemon
