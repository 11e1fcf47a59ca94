// WatchEventQueue: what a watch-event flood (XSA-349) leaves queued.
#include "common/hv/watch_event_queue.hpp"

#include <gtest/gtest.h>

namespace unetback::hv {
namespace {

TEST(WatchEventQueue, GuestRewritingItsStateHoldsOneQueuedEventHoweverFastItWrites) {
  WatchEventQueue q;
  for (int i = 0; i < 100000; ++i)
    q.push({"/local/domain/5/device/vif/0/state", "unetback/vif/5/0/frontend-state"});
  EXPECT_EQ(q.size(), 1U);
  EXPECT_EQ(q.merged(), 99999U);
  const auto ev = q.pop();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->path, "/local/domain/5/device/vif/0/state");
  EXPECT_FALSE(q.pop());
  // Handed out: the next change is news again.
  EXPECT_TRUE(q.push({"/local/domain/5/device/vif/0/state", "unetback/vif/5/0/frontend-state"}));
}

TEST(WatchEventQueue, AnotherGuestsEventWaitsBehindOneFloodEventNotBehindTheFlood) {
  WatchEventQueue q;
  q.push({"/local/domain/5/device/vif/0/state", "fe5"});
  for (int i = 0; i < 1000; ++i) {
    q.push({"/local/domain/5/device/vif/0/state", "fe5"});
    if (i == 10) q.push({"/local/domain/0/backend/vif/6/0", "backends"});
  }
  ASSERT_EQ(q.size(), 2U);
  EXPECT_EQ(q.pop()->token, "fe5");
  EXPECT_EQ(q.pop()->token, "backends");
}

TEST(WatchEventQueue, DistinctPathsOrTokensAreKeptInArrivalOrder) {
  WatchEventQueue q;
  q.push({"/a", "t1"});
  q.push({"/b", "t1"});
  q.push({"/a", "t2"});
  q.push({"/a", "t1"});
  ASSERT_EQ(q.size(), 3U);
  EXPECT_EQ(q.pop()->path, "/a");
  EXPECT_EQ(q.pop()->path, "/b");
  const auto last = q.pop();
  EXPECT_EQ(last->path, "/a");
  EXPECT_EQ(last->token, "t2");
}

TEST(WatchEventQueue, UnwatchDropsTheWatchsEventsAtAndBelowItsPathOnly) {
  WatchEventQueue q;
  q.push({"/local/domain/0/backend/vif/5/0/state", "vif5"});
  q.push({"/local/domain/0/backend/vif/5/0", "vif5"});
  q.push({"/local/domain/0/backend/vif/5/00", "vif5"});  // a sibling, not below
  q.push({"/local/domain/0/backend/vif/5/0/state", "other"});
  q.remove_watch("/local/domain/0/backend/vif/5/0", "vif5");
  ASSERT_EQ(q.size(), 2U);
  EXPECT_EQ(q.pop()->path, "/local/domain/0/backend/vif/5/00");
  EXPECT_EQ(q.pop()->token, "other");
  // The removed keys are free again.
  EXPECT_TRUE(q.push({"/local/domain/0/backend/vif/5/0/state", "vif5"}));
}

TEST(XsPathIsUnder, ComponentBoundaries) {
  EXPECT_TRUE(xs_path_is_under("/a/b", "/a/b"));
  EXPECT_TRUE(xs_path_is_under("/a/b", "/a/b/c"));
  EXPECT_FALSE(xs_path_is_under("/a/b", "/a/bc"));
  EXPECT_FALSE(xs_path_is_under("/a/b", "/a"));
}

}  // namespace
}  // namespace unetback::hv
