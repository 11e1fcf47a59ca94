// WatchEventQueue: what a watch-event flood (XSA-349) leaves queued.
#include "common/hv/watch_event_queue.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <string>

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

// Watches are recursive: a guest making and removing fresh child names under its own F:state
// fires one distinct event per name. The watch keeps a bounded number pending, then one event
// at its own node ("read it all again"), which every later event of it merges into; another
// guest's event keeps its place.
TEST(WatchEventQueue, FreshChildNamesUnderAWatchedNodeHoldABoundedNumberOfEvents) {
  WatchEventQueue q;
  const std::string state = "/local/domain/5/device/vif/0/state";
  q.add_watch(state, "fe5");
  q.push({"/local/domain/6/device/vif/0/state", "fe6"});
  std::size_t peak = 0;
  for (int i = 0; i < 100000; ++i) {
    q.push({state + "/" + std::string(900, 'n') + std::to_string(i), "fe5"});
    if (i == 50) q.push({"/local/domain/0/backend/vif/7/0", "backends"});
    peak = std::max(peak, q.size());
  }
  EXPECT_LE(peak, WatchEventQueue::kMaxPendingPerWatch + 2);
  EXPECT_EQ(q.collapsed(), 1U);
  ASSERT_EQ(q.size(), 3U);
  EXPECT_EQ(q.pop()->token, "fe6");
  const auto flood = q.pop();
  ASSERT_TRUE(flood);
  EXPECT_EQ(flood->token, "fe5");
  EXPECT_EQ(flood->path, state) << "the collapsed event names the watched node";
  EXPECT_EQ(q.pop()->token, "backends");
  EXPECT_FALSE(q.pop());
  // Handed out: the watch queues child events again, one per node.
  EXPECT_TRUE(q.push({state + "/a", "fe5"}));
  EXPECT_TRUE(q.push({state + "/b", "fe5"}));
  EXPECT_FALSE(q.push({state + "/a", "fe5"}));
  EXPECT_EQ(q.size(), 2U);
}

// A watch the queue was not told of collapses into its first pending event's node; an unwatch
// drops the collapsed event with the rest.
TEST(WatchEventQueue, AnUnknownWatchCollapsesIntoItsFirstNodeAndUnwatchDropsIt) {
  WatchEventQueue q;
  for (int i = 0; i < 1000; ++i) q.push({"/x/" + std::to_string(i), "t"});
  ASSERT_EQ(q.size(), 1U);
  q.remove_watch("/x", "t");
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.push({"/x/0", "t"}));
}

TEST(XsPathIsUnder, ComponentBoundaries) {
  EXPECT_TRUE(xs_path_is_under("/a/b", "/a/b"));
  EXPECT_TRUE(xs_path_is_under("/a/b", "/a/b/c"));
  EXPECT_FALSE(xs_path_is_under("/a/b", "/a/bc"));
  EXPECT_FALSE(xs_path_is_under("/a/b", "/a"));
}

}  // namespace
}  // namespace unetback::hv
