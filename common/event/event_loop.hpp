// EventLoop: one data-path thread's loop (epoll), in place of a Boost.Asio io_context.
//
// Why not Asio: its epoll reactor re-arms a descriptor with EPOLL_CTL_MOD at every async_wait
// (Boost 1.74, epoll_reactor::start_op), so each wake-up of a queue cost an epoll_ctl beside
// its epoll_wait. In a PV dom0 every syscall is a trip through Xen. Here a descriptor is
// registered once, edge-triggered, and its readiness is remembered in user space:
//
//  * LoopWatch::async_wait completes at once while the descriptor is "ready", else at its
//    next edge. It stays ready until the reader says drained(): it read until EAGAIN. A
//    reader that stops early (no room) leaves it ready, so its next wait completes at once:
//    the level-triggered behaviour the data paths rely on, with no syscall to ask for it.
//  * LoopTimer: the armed timers of a loop share one timerfd, set only when the earliest
//    expiry changes (no clock read per pass).
//  * post(): from the loop's thread, a vector push; from another thread, under a mutex, and
//    an eventfd write only when the loop sleeps (or is about to).
//  * Tasks and handlers are InlineFunctions: posting or arming allocates nothing.
//
// Threads: post() and stop() from any thread. A watch or timer is armed, cancelled and closed
// on its loop's thread; it may be created (and, never armed, destroyed) on any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "common/event/inline_function.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::event {

class LoopWatch;
class LoopTimer;

class EventLoop {
 public:
  using Task = InlineFunction<void(), 64>;
  using Handler = InlineFunction<void(std::error_code), 32>;
  using Clock = std::chrono::steady_clock;

  /// `name` prefixes what a task throws, in the log. Throws SetupError when epoll, the
  /// eventfd or the timerfd cannot be had.
  explicit EventLoop(std::string name);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  /// Runs tasks and handlers until stop(). What one throws is logged; the loop goes on.
  void run();
  /// Makes run() return after the task it runs. Any thread.
  void stop();
  /// Runs `t` on the loop's thread, after the tasks posted before it. Any thread.
  void post(Task t);
  [[nodiscard]] bool in_loop_thread() const;

  /// What the loop did (its own thread's counts; read from any thread).
  struct Stats {
    std::atomic<std::uint64_t> waits{0};       // epoll_wait calls
    std::atomic<std::uint64_t> sleeps{0};      // of them, the ones that could block
    std::atomic<std::uint64_t> wakes{0};       // eventfd writes by posters on other threads
    std::atomic<std::uint64_t> timer_sets{0};  // timerfd_settime calls
  };
  [[nodiscard]] const Stats& stats() const { return stats_; }

 private:
  friend class LoopWatch;
  friend class LoopTimer;

  // A registered descriptor. Owned by the loop, so an event harvested just before its watch
  // closed still points at valid memory: a dead slot is reused only at the top of the next
  // round, after that round's events were all looked at.
  struct Slot {
    int fd = -1;
    std::atomic<bool> dead{true};
    bool ready = false;  // an edge came and the reader has not drained since
    Handler handler;     // the armed wait
  };

  Slot* open_slot(int fd);            // throws SetupError (epoll_ctl's errno)
  void close_slot(Slot* s) noexcept;  // any thread, when no wait is armed on another
  void recycle_slots();
  void on_ready(Slot* s);
  void take_remote();
  void run_tasks();
  void arm_timer(LoopTimer* t);
  void disarm_timer(LoopTimer* t) noexcept;
  void fire_timers();
  void program_timerfd();
  void wake() noexcept;
  template <typename F, typename... A>
  void call_logged(F& f, A&&... a) noexcept;

  std::string name_;
  UniqueFd epoll_, wake_fd_, timer_fd_;
  std::atomic<bool> stop_{false};
  // Posted from this thread: ready_; run a round at a time from running_.
  std::vector<Task> ready_, running_;
  // Posted from other threads.
  std::mutex mu_;  // guards remote_, slots_, free_, dead_
  std::vector<Task> remote_;
  std::atomic<bool> remote_pending_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> wake_sent_{false};
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> free_, dead_;
  std::atomic<bool> have_dead_{false};
  // Armed timers (loop thread only) and what the timerfd is set to.
  std::vector<LoopTimer*> timers_;
  std::vector<Handler> due_timers_;  // fire_timers' scratch
  Clock::time_point programmed_ = Clock::time_point::max();
  Stats stats_;
};

/// A descriptor the loop watches for readability. Does not own the fd: close() (or the
/// destructor) must come before the fd is closed.
class LoopWatch {
 public:
  explicit LoopWatch(EventLoop& loop) : loop_(&loop) {}
  ~LoopWatch() { close(); }
  LoopWatch(const LoopWatch&) = delete;
  LoopWatch& operator=(const LoopWatch&) = delete;

  /// Registers `fd` (edge-triggered). Throws SetupError with epoll_ctl's errno.
  void watch(int fd);
  [[nodiscard]] bool is_open() const { return slot_ != nullptr; }
  /// Calls `h({})` once the fd is readable: at once (posted) while it is still ready, else at
  /// its next edge. One wait at a time. Loop thread.
  void async_wait(EventLoop::Handler h);
  /// The reader read until EAGAIN (or the device said "nothing more"): the next wait waits for
  /// a new edge. Loop thread.
  void drained() {
    if (slot_ != nullptr) slot_->ready = false;
  }
  /// An armed wait completes with operation_canceled (posted). Loop thread.
  void cancel();
  /// Cancels and unregisters. Loop thread, or any thread while no wait is armed.
  void close() noexcept;

 private:
  EventLoop* loop_;
  EventLoop::Slot* slot_ = nullptr;
};

/// A one-shot timer on the loop, as boost::asio::steady_timer: setting the expiry cancels a
/// wait that is armed (operation_canceled). Arm, cancel and destroy on the loop's thread (a
/// timer never armed may be destroyed anywhere).
class LoopTimer {
 public:
  using Clock = EventLoop::Clock;
  explicit LoopTimer(EventLoop& loop) : loop_(&loop) {}
  ~LoopTimer() { cancel(); }
  LoopTimer(const LoopTimer&) = delete;
  LoopTimer& operator=(const LoopTimer&) = delete;

  void expires_at(Clock::time_point t) {
    cancel();
    expiry_ = t;
  }
  void expires_after(Clock::duration d) { expires_at(Clock::now() + d); }
  [[nodiscard]] Clock::time_point expiry() const { return expiry_; }
  void async_wait(EventLoop::Handler h);
  /// A wait that is armed completes with operation_canceled (posted); 1 if there was one.
  std::size_t cancel() noexcept;

 private:
  friend class EventLoop;
  EventLoop* loop_;
  Clock::time_point expiry_{};
  EventLoop::Handler handler_;
  bool armed_ = false;
};

}  // namespace unetback::event
