// EventLoop: the data-path thread's loop. A descriptor is registered once (edge-triggered) and
// its readiness kept in user space until the reader says it drained it, so a reader that
// stops early is called again at its next wait with no new edge; timers share one timerfd;
// posts from other threads wake a sleeping loop.
#include "common/event/event_loop.hpp"

#include <atomic>
#include <chrono>
#include <fcntl.h>
#include <functional>
#include <future>
#include <gtest/gtest.h>
#include <map>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::event {
namespace {

using namespace std::chrono_literals;

/// A loop on its own thread; stopped and joined at the end.
class RunningLoop {
 public:
  RunningLoop() : thread_([this] { loop.run(); }) {}
  ~RunningLoop() {
    loop.stop();
    thread_.join();
  }
  RunningLoop(const RunningLoop&) = delete;
  RunningLoop& operator=(const RunningLoop&) = delete;
  /// Runs `f` on the loop's thread and waits for it.
  template <typename F>
  void on_loop(F f) {
    std::promise<void> done;
    loop.post([&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }
  /// Returns once the loop took every event its descriptors had when this was called, and
  /// ran what those events and earlier tasks posted: a round is the posted tasks, then
  /// epoll_wait and the handlers of what it returned. The first task runs in some round, the
  /// second in a later one, after that round's events.
  void settle() {
    on_loop([] {});
    on_loop([] {});
  }
  EventLoop loop{"test-loop"};

 private:
  std::thread thread_;
};

struct Pipe {
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    r = UniqueFd(fds[0]);
    w = UniqueFd(fds[1]);
  }
  void put(int n) const {
    const std::vector<char> b(static_cast<std::size_t>(n), 'x');
    EXPECT_EQ(::write(w.get(), b.data(), b.size()), n);
  }
  /// Reads one byte: true if there was one.
  [[nodiscard]] bool take_one() const {
    char c;
    return ::read(r.get(), &c, 1) == 1;
  }
  UniqueFd r, w;
};

// How long a wait for something that must happen may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr auto kHangGuard = 30s;

template <typename P>
bool wait_until(P pred, std::chrono::milliseconds limit = kHangGuard) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(EventLoop, TasksPostedFromAnotherThreadRunInOrderOnTheLoopsThreadAndWakeItFromSleep) {
  RunningLoop l;
  // The loop has gone to sleep: it counts a sleep just before its blocking epoll_wait, and a
  // post from another thread after that must wake it.
  ASSERT_TRUE(wait_until([&] { return l.loop.stats().sleeps.load() >= 1; }));
  std::vector<int> seen;
  std::atomic<bool> in_loop{true};
  std::promise<void> done;
  for (int i = 0; i < 100; ++i) {
    l.loop.post([&, i] {
      if (!l.loop.in_loop_thread()) in_loop = false;
      seen.push_back(i);
      if (i == 99) done.set_value();
    });
  }
  ASSERT_EQ(done.get_future().wait_for(kHangGuard), std::future_status::ready);
  EXPECT_TRUE(in_loop.load());
  ASSERT_EQ(seen.size(), 100U);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
  EXPECT_GE(l.loop.stats().wakes.load(), 1U);  // at least the first post woke it
}

TEST(EventLoop, ATaskPostedByATaskRunsInTheNextRoundAfterTheOthers) {
  RunningLoop l;
  std::vector<std::string> order;
  l.on_loop([&] {
    l.loop.post([&] {
      order.emplace_back("a");
      l.loop.post([&] { order.emplace_back("a2"); });
    });
    l.loop.post([&] { order.emplace_back("b"); });
  });
  l.on_loop([] {});
  l.on_loop([] {});
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a2"}));
}

TEST(EventLoop, AWaitCompletesAtTheDescriptorsNextEdge) {
  RunningLoop l;
  Pipe p;
  LoopWatch w(l.loop);
  w.watch(p.r.get());
  std::atomic<int> calls{0};
  l.on_loop([&] {
    w.async_wait([&](std::error_code ec) {
      EXPECT_FALSE(ec);
      ++calls;
    });
  });
  l.settle();
  EXPECT_EQ(calls.load(), 0);  // nothing to read: the wait waits
  p.put(1);
  EXPECT_TRUE(wait_until([&] { return calls.load() == 1; }));
  l.on_loop([&] { w.close(); });
}

TEST(EventLoop, AReaderThatStopsBeforeEagainIsCalledAgainAtItsNextWaitWithoutANewEdge) {
  RunningLoop l;
  Pipe p;
  LoopWatch w(l.loop);
  w.watch(p.r.get());
  p.put(3);  // three frames wait; the reader takes one per call, as a queue short of room
  std::atomic<int> taken{0};
  std::atomic<bool> drained{false};
  std::function<void()> arm = [&] {
    w.async_wait([&](std::error_code ec) {
      if (ec) return;
      if (p.take_one()) {
        ++taken;
      } else {
        w.drained();  // EAGAIN: the next wait waits for a new edge
        drained = true;
        return;
      }
      arm();
    });
  };
  l.on_loop(arm);
  // No write after the first edge, yet all three are taken, and then the reader finds EAGAIN.
  EXPECT_TRUE(wait_until([&] { return drained.load(); }));
  EXPECT_EQ(taken.load(), 3);
  // Drained: the watch waits for the next edge.
  l.on_loop(arm);
  l.settle();
  EXPECT_EQ(taken.load(), 3);
  p.put(1);
  EXPECT_TRUE(wait_until([&] { return taken.load() == 4; }));
  l.on_loop([&] { w.close(); });
}

TEST(EventLoop, ReadinessFromBeforeTheWatchIsSeenByTheFirstWait) {
  RunningLoop l;
  Pipe p;
  p.put(1);
  LoopWatch w(l.loop);
  w.watch(p.r.get());
  std::atomic<int> calls{0};
  l.on_loop([&] { w.async_wait([&](std::error_code) { ++calls; }); });
  EXPECT_TRUE(wait_until([&] { return calls.load() == 1; }));
  l.on_loop([&] { w.close(); });
}

TEST(EventLoop, CancelCompletesTheWaitWithOperationCanceledAndAClosedWatchHearsNothing) {
  RunningLoop l;
  Pipe p;
  LoopWatch w(l.loop);
  w.watch(p.r.get());
  std::promise<std::error_code> got;
  l.on_loop([&] { w.async_wait([&](std::error_code ec) { got.set_value(ec); }); });
  l.on_loop([&] { w.cancel(); });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(f.get(), std::make_error_code(std::errc::operation_canceled));
  // Closed with a wait armed: the wait is cancelled, and a later edge calls nothing.
  std::atomic<int> after{0};
  std::promise<std::error_code> closed;
  l.on_loop([&] {
    w.async_wait([&](std::error_code ec) {
      ++after;
      closed.set_value(ec);
    });
    w.close();
  });
  auto fc = closed.get_future();
  ASSERT_EQ(fc.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(fc.get(), std::make_error_code(std::errc::operation_canceled));
  p.put(1);
  l.settle();
  EXPECT_EQ(after.load(), 1);
  EXPECT_FALSE(w.is_open());
}

TEST(EventLoop, ASlotClosedAndReusedIsNotWokenByItsOldDescriptor) {
  RunningLoop l;
  Pipe a, b;
  LoopWatch w1(l.loop), w2(l.loop);
  l.on_loop([&] {
    w1.watch(a.r.get());
    w1.close();
    w2.watch(b.r.get());  // may take w1's slot
  });
  std::atomic<int> calls{0};
  l.on_loop([&] { w2.async_wait([&](std::error_code) { ++calls; }); });
  a.put(1);
  l.settle();
  EXPECT_EQ(calls.load(), 0);
  b.put(1);
  EXPECT_TRUE(wait_until([&] { return calls.load() == 1; }));
  l.on_loop([&] { w2.close(); });
}

// Expiry order is pass order: a timer never fires in an earlier pass of the loop (an
// epoll_wait) than one that expires before it, and none fires before its expiry. A loop held
// past several expiries finds them due in one pass; their order within it is not checked.
TEST(EventLoop, TimersFireInExpiryOrderAndANewExpiryCancelsTheArmedWait) {
  RunningLoop l;
  LoopTimer t1(l.loop), t2(l.loop), t3(l.loop);
  std::map<int, std::uint64_t> pass;  // timer -> the loop's epoll_wait count when it fired
  std::vector<int> early;             // timers that fired before their expiry
  std::error_code replaced;
  std::promise<void> done;
  const auto fired = [&](int n, const LoopTimer& t) {
    pass[n] = l.loop.stats().waits.load();
    if (LoopTimer::Clock::now() < t.expiry()) early.push_back(n);
  };
  l.on_loop([&] {
    t1.expires_after(40ms);
    t1.async_wait([&](std::error_code ec) {
      if (!ec) fired(1, t1);
    });
    t2.expires_after(10ms);
    t2.async_wait([&](std::error_code ec) {
      if (!ec) fired(2, t2);
    });
    t3.expires_after(1h);
    t3.async_wait([&](std::error_code ec) { replaced = ec; });
    t3.expires_after(70ms);  // the wait for the hour completes now, cancelled
    t3.async_wait([&](std::error_code ec) {
      if (!ec) fired(3, t3);
      done.set_value();
    });
  });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(kHangGuard), std::future_status::ready);
  l.settle();
  l.on_loop([&] {
    ASSERT_EQ(pass.size(), 3U) << "every timer fired";
    EXPECT_LE(pass[2], pass[1]) << "10 ms fired in a later pass than 40 ms";
    EXPECT_LE(pass[1], pass[3]) << "40 ms fired in a later pass than 70 ms";
    EXPECT_TRUE(early.empty()) << ::testing::PrintToString(early);
  });
  EXPECT_EQ(replaced, std::make_error_code(std::errc::operation_canceled));
}

// The cancelled timer would have fired before `later` expires: once `later` fired, a wrong
// cancel would have shown.
TEST(EventLoop, ACancelledTimerDoesNotFireAndAPastExpiryFiresAtOnce) {
  RunningLoop l;
  LoopTimer t(l.loop), past(l.loop), later(l.loop);
  std::atomic<int> ok{0};
  std::atomic<int> cancelled{0};
  std::promise<void> done, passed;
  l.on_loop([&] {
    t.expires_after(20ms);
    t.async_wait([&](std::error_code ec) { ec ? ++cancelled : ++ok; });
    EXPECT_EQ(t.cancel(), 1U);
    EXPECT_EQ(t.cancel(), 0U);
    later.expires_at(t.expiry() + 30ms);
    later.async_wait([&](std::error_code ec) {
      EXPECT_FALSE(ec);
      passed.set_value();
    });
    past.expires_at(EventLoop::Clock::now() - 1s);
    past.async_wait([&](std::error_code ec) {
      EXPECT_FALSE(ec);
      done.set_value();
    });
  });
  ASSERT_EQ(done.get_future().wait_for(kHangGuard), std::future_status::ready);
  ASSERT_EQ(passed.get_future().wait_for(kHangGuard), std::future_status::ready);
  l.settle();
  EXPECT_EQ(ok.load(), 0);
  EXPECT_EQ(cancelled.load(), 1);
}

TEST(EventLoop, ATaskThatThrowsIsLoggedAndTheLoopGoesOn) {
  RunningLoop l;
  l.loop.post([] { throw std::runtime_error("a handler's bug"); });
  std::promise<void> after;
  l.loop.post([&] { after.set_value(); });
  EXPECT_EQ(after.get_future().wait_for(kHangGuard), std::future_status::ready);
}

TEST(EventLoop, AWatchThatCannotRegisterThrowsSetupError) {
  RunningLoop l;
  LoopWatch w(l.loop);
  EXPECT_THROW(w.watch(-1), SetupError);  // EBADF
  EXPECT_FALSE(w.is_open());
}

}  // namespace
}  // namespace unetback::event
