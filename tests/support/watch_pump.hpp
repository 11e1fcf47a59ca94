// WatchPump: the backend's xenstore loop for tests that drive backend objects in their own
// process (the daemon's BackendManager does this in unetbackd): a thread that waits on a
// connection's watch fd and hands each watch event to the test's handler, until destroyed.
#pragma once

#include <atomic>
#include <functional>
#include <poll.h>
#include <thread>
#include <utility>

#include "common/hv/xenstore.hpp"

namespace unetback::test {

class WatchPump {
 public:
  using Handler = std::function<void(const hv::XsWatchEvent&)>;

  /// Starts handing `xs`'s watch events to `handle`, on a thread of its own.
  WatchPump(hv::XenStore& xs, Handler handle) : xs_(xs), handle_(std::move(handle)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd pfd{xs_.watch_fd(), POLLIN, 0};
        (void)::poll(&pfd, 1, 20);
        while (auto ev = xs_.read_watch()) handle_(*ev);
      }
    });
  }
  /// Stops the thread (after the event in hand, if any).
  ~WatchPump() {
    stop_ = true;
    thread_.join();
  }
  WatchPump(const WatchPump&) = delete;
  WatchPump& operator=(const WatchPump&) = delete;

 private:
  hv::XenStore& xs_;
  Handler handle_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace unetback::test
