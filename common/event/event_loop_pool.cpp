#include "common/event/event_loop_pool.hpp"

#include <algorithm>
#include <string>

#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::event {

EventLoopPool::EventLoopPool(unsigned threads) {
  if (threads == 0) throw SetupError("threads must be at least 1");
  for (unsigned i = 0; i < threads; ++i) add_loop();
}

void EventLoopPool::add_loop() {
  const auto i = static_cast<unsigned>(loops_.size());
  // The loop's epoll, eventfd and timerfd come now rather than at the first vif: the
  // daemon's fds and memory then stay flat as vifs come and go. What a handler throws is
  // logged by the loop, which goes on with every other vif on it.
  auto loop = std::make_unique<Loop>("loop" + std::to_string(i));
  Loop* l = loop.get();
  l->thread = std::thread([l, i] {
    for (;;) {
      try {
        l->loop.run();
        return;
      } catch (const std::exception& e) {
        // Only the loop's own bookkeeping can throw here (out of memory growing a vector):
        // what handlers throw is caught around each one. Log it and keep the loop's vifs.
        log::write(log::Level::error, "loop" + std::to_string(i), e.what());
      }
    }
  });
  loops_.push_back(std::move(loop));
}

EventLoopPool::~EventLoopPool() {
  for (auto& l : loops_) l->loop.stop();
  for (auto& l : loops_)
    if (l->thread.joinable()) l->thread.join();
}

EventLoop& EventLoopPool::next(unsigned active) {
  const std::lock_guard lock(mu_);
  active = std::max(active, 1U);
  // A loop that cannot start (threads or descriptors out) throws: the caller's connect fails.
  while (loops_.size() < active) add_loop();
  return loops_[next_++ % active]->loop;
}

unsigned EventLoopPool::size() const {
  const std::lock_guard lock(mu_);
  return static_cast<unsigned>(loops_.size());
}

}  // namespace unetback::event
