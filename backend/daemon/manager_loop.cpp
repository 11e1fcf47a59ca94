#include "backend/daemon/manager_loop.hpp"

#include <boost/asio/post.hpp>

namespace unetback::daemon {

ManagerLoop::ManagerLoop(boost::asio::io_context& io, BackendManager& manager, int watch_fd,
                         std::chrono::milliseconds check_interval)
    : manager_(manager), watch_(io, watch_fd), check_timer_(io), check_interval_(check_interval) {}

ManagerLoop::~ManagerLoop() {
  stop();
  // The descriptor belongs to the XenStore connection: release it instead of closing it.
  (void)watch_.release();
}

void ManagerLoop::start() {
  stopped_ = false;
  manager_.process_events();
  do_wait();
  do_check();
}

void ManagerLoop::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  watch_.cancel(ignored);
  check_timer_.cancel();
}

void ManagerLoop::do_wait() {
  watch_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                    [this](const boost::system::error_code& ec) {
                      if (ec || stopped_) return;
                      // Bounded per round: if more remain, the fd is still readable and the
                      // next wait completes at once, after the control socket had its turn.
                      manager_.process_events();
                      do_wait();
                    });
}

void ManagerLoop::do_check() {
  check_timer_.expires_after(check_interval_);
  check_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    manager_.check_vifs();
    do_check();
  });
}

}  // namespace unetback::daemon
