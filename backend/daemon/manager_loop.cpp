#include "backend/daemon/manager_loop.hpp"

#include <boost/asio/post.hpp>
#include <cstdint>

namespace unetback::daemon {

ManagerLoop::ManagerLoop(boost::asio::io_context& io, BackendManager& manager, int watch_fd,
                         std::chrono::milliseconds check_interval)
    : io_(io),
      manager_(manager),
      watch_(io, watch_fd),
      check_timer_(io),
      check_interval_(check_interval) {}

ManagerLoop::~ManagerLoop() {
  stop();
  // The descriptor belongs to the XenStore connection: release it instead of closing it.
  (void)watch_.release();
}

void ManagerLoop::start() {
  stopped_ = false;
  do_round();
  do_check();
}

void ManagerLoop::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  watch_.cancel(ignored);
  check_timer_.cancel();
}

void ManagerLoop::do_round() {
  round_posted_ = false;
  if (stopped_) return;
  const bool more = manager_.process_events();
  if (check_lost()) return;
  check_serving();
  if (more) {
    // Events remain (merged per node, so bounded): go on after the io_context's other work.
    round_posted_ = true;
    boost::asio::post(io_, [this] { do_round(); });
    return;
  }
  do_wait();
}

void ManagerLoop::do_wait() {
  // A wait that do_check() replaced by a posted round may still complete (cancel() does not
  // recall a completion already queued): its generation tells it to do nothing.
  const std::uint64_t gen = ++wait_gen_;
  watch_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                    [this, gen](const boost::system::error_code& ec) {
                      if (ec || stopped_ || gen != wait_gen_) return;
                      do_round();
                    });
}

void ManagerLoop::do_check() {
  check_timer_.expires_after(check_interval_);
  check_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    manager_.check_vifs();
    // A connection that died makes no fd readable: look for it here too. read_watch() is
    // what notices it, and a round takes any event it finds along.
    if (!round_posted_ && manager_.xenstore_error() == std::error_code{}) {
      ++wait_gen_;  // the round below waits again
      boost::system::error_code ignored;
      watch_.cancel(ignored);
      round_posted_ = true;
      boost::asio::post(io_, [this] { do_round(); });
    }
    if (check_lost()) return;
    do_check();
  });
}

void ManagerLoop::check_serving() {
  if (!on_serving_ || !manager_.initial_scan_done()) return;
  auto handler = std::move(on_serving_);
  on_serving_ = nullptr;
  handler();
}

bool ManagerLoop::check_lost() {
  const auto ec = manager_.xenstore_error();
  if (!ec) return false;
  stop();
  if (on_lost_) {
    auto handler = std::move(on_lost_);
    on_lost_ = nullptr;
    handler(ec);
  }
  return true;
}

}  // namespace unetback::daemon
