// EventLoopPool: queues placed round-robin over the loops the `threads` tunable asks for, and
// a later change of the tunable applies to the queues placed after it (issue 15 #14).
#include "common/event/event_loop_pool.hpp"

#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <set>
#include <thread>

namespace unetback::event {
namespace {

TEST(EventLoopPool, PlacesQueuesRoundRobinOverTheActiveLoops) {
  EventLoopPool pool(2);
  std::set<EventLoop*> seen;
  for (int i = 0; i < 4; ++i) seen.insert(&pool.next(2));
  EXPECT_EQ(seen.size(), 2U);
}

TEST(EventLoopPool, MoreThreadsLaterStartsLoopsForTheQueuesPlacedAfterIt) {
  EventLoopPool pool(1);
  std::set<EventLoop*> seen;
  for (int i = 0; i < 6; ++i) seen.insert(&pool.next(3));
  EXPECT_EQ(pool.size(), 3U);
  EXPECT_EQ(seen.size(), 3U);
  // A loop that was started runs handlers.
  std::atomic<int> ran{0};
  for (auto* loop : seen) loop->post([&ran] { ++ran; });
  // A guard against a hang only: a run that works ends the wait long before it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ran.load() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(ran.load(), 3);
}

TEST(EventLoopPool, FewerThreadsLaterUsesOnlyTheFirstLoops) {
  EventLoopPool pool(4);
  std::set<EventLoop*> seen;
  for (int i = 0; i < 8; ++i) seen.insert(&pool.next(2));
  EXPECT_EQ(seen.size(), 2U);
  EXPECT_EQ(pool.size(), 4U);  // the others idle (their queues, if any, keep them)
}

}  // namespace
}  // namespace unetback::event
