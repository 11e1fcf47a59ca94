// EventLoopPool: the daemon's data-path threads, one Boost.Asio io_context each. Queues are
// placed round-robin; everything a queue does runs on its thread, so the data paths need no
// locks. The `threads` tunable sets the count: the daemon starts as many loops as it says,
// and a later change applies to queues placed after it (more loops are started when it
// grows; when it shrinks, new queues go to the first loops only and the others idle until
// their queues leave).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>  // before Boost.Asio (Boost 1.74 + C++20)
#include <vector>

namespace unetback::vif {

class EventLoopPool {
 public:
  explicit EventLoopPool(unsigned threads);
  ~EventLoopPool();  // stops and joins the threads
  EventLoopPool(const EventLoopPool&) = delete;
  EventLoopPool& operator=(const EventLoopPool&) = delete;

  /// The loop for the next queue, round-robin over the first `active` loops (at least 1),
  /// starting loops up to `active` if there are fewer. Thread-safe.
  boost::asio::io_context& next(unsigned active);
  /// The next loop among all of them.
  boost::asio::io_context& next() { return next(size()); }
  /// Loops running now.
  [[nodiscard]] unsigned size() const;

 private:
  void add_loop();  // under mu_ (or in the constructor)

  struct Loop {
    boost::asio::io_context io{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{
        io.get_executor()};
    std::thread thread;
  };
  mutable std::mutex mu_;  // guards loops_ (grown by next) and next_
  std::vector<std::unique_ptr<Loop>> loops_;
  unsigned next_ = 0;
};

}  // namespace unetback::vif
