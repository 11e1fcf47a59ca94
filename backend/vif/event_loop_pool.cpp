#include "backend/vif/event_loop_pool.hpp"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>

#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::vif {

EventLoopPool::EventLoopPool(unsigned threads) {
  if (threads == 0) throw SetupError("threads must be at least 1");
  for (unsigned i = 0; i < threads; ++i) add_loop();
}

void EventLoopPool::add_loop() {
  const auto i = static_cast<unsigned>(loops_.size());
  auto loop = std::make_unique<Loop>();
  Loop* l = loop.get();
  // Create the loop's reactor (epoll, eventfd, timerfd) now rather than at the first vif:
  // the daemon's fds and memory then stay flat as vifs come and go.
  { boost::asio::steady_timer warm_up(l->io); }
  l->thread = std::thread([l, i] {
    for (;;) {
      try {
        l->io.run();
        return;
      } catch (const std::exception& e) {
        // A handler threw: log and keep the loop (and every other vif on it) alive.
        log::write(log::Level::error, "loop" + std::to_string(i), e.what());
      }
    }
  });
  loops_.push_back(std::move(loop));
}

EventLoopPool::~EventLoopPool() {
  for (auto& l : loops_) l->guard.reset();
  for (auto& l : loops_) l->io.stop();
  for (auto& l : loops_)
    if (l->thread.joinable()) l->thread.join();
}

boost::asio::io_context& EventLoopPool::next(unsigned active) {
  const std::lock_guard lock(mu_);
  active = std::max(active, 1U);
  // A loop that cannot start (threads or descriptors out) throws: the caller's connect fails.
  while (loops_.size() < active) add_loop();
  return loops_[next_++ % active]->io;
}

unsigned EventLoopPool::size() const {
  const std::lock_guard lock(mu_);
  return static_cast<unsigned>(loops_.size());
}

}  // namespace unetback::vif
