// EventLoopPool: the daemon's data-path threads, one EventLoop each. Queues are
// placed round-robin; everything a queue does runs on its thread, so the data paths need no
// locks. The `threads` tunable sets the count: the daemon starts as many loops as it says,
// and a later change applies to queues placed after it (more loops are started when it
// grows; when it shrinks, new queues go to the first loops only and the others idle until
// their queues leave).
#pragma once

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/event/event_loop.hpp"

namespace unetback::event {

class EventLoopPool {
 public:
  explicit EventLoopPool(unsigned threads);
  ~EventLoopPool();  // stops and joins the threads
  EventLoopPool(const EventLoopPool&) = delete;
  EventLoopPool& operator=(const EventLoopPool&) = delete;

  /// The loop for the next queue, round-robin over the first `active` loops (at least 1),
  /// starting loops up to `active` if there are fewer. Thread-safe.
  EventLoop& next(unsigned active);
  /// The next loop among all of them.
  EventLoop& next() { return next(size()); }
  /// Loops running now.
  [[nodiscard]] unsigned size() const;

 private:
  void add_loop();  // under mu_ (or in the constructor)

  struct Loop {
    explicit Loop(std::string name) : loop(std::move(name)) {}
    EventLoop loop;
    std::thread thread;
  };
  mutable std::mutex mu_;  // guards loops_ (grown by next) and next_
  std::vector<std::unique_ptr<Loop>> loops_;
  unsigned next_ = 0;
};

}  // namespace unetback::event
