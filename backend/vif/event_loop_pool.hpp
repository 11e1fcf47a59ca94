// EventLoopPool: the daemon's data-path threads, one Boost.Asio io_context each. Queues are
// placed round-robin; everything a queue does runs on its thread, so the data paths need no
// locks (the `threads` tunable sets the count).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
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

  /// The loop for the next queue (round-robin). Thread-safe.
  boost::asio::io_context& next();
  [[nodiscard]] unsigned size() const { return static_cast<unsigned>(loops_.size()); }

 private:
  struct Loop {
    boost::asio::io_context io{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{
        io.get_executor()};
    std::thread thread;
  };
  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<unsigned> next_{0};
};

}  // namespace unetback::vif
