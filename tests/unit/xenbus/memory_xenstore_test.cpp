// The test fake itself: the adapter tests are only as good as its watch semantics.
#include "tests/unit/xenbus/memory_xenstore.hpp"

#include <gtest/gtest.h>

namespace unetback::testing {
namespace {

std::vector<hv::XsWatchEvent> drain(MemoryXenStore& xs) {
  std::vector<hv::XsWatchEvent> out;
  while (auto e = xs.read_watch()) out.push_back(*e);
  return out;
}

TEST(MemoryXenStore, WriteCreatesParentsAndReadsBack) {
  MemoryXenStore xs;
  ASSERT_FALSE(xs.write("/a/b/c", "v"));
  EXPECT_EQ(*xs.read("/a/b/c"), "v");
  EXPECT_EQ(*xs.read("/a/b"), "");
  auto d = xs.directory("/a");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, std::vector<std::string>{"b"});
  EXPECT_EQ(xs.read("/a/x").error(), std::errc::no_such_file_or_directory);
}

TEST(MemoryXenStore, WatchFiresInitiallyThenForTheNodeAndDescendants) {
  MemoryXenStore xs;
  ASSERT_FALSE(xs.watch("/a", "t"));
  ASSERT_FALSE(xs.write("/a/b", "1"));
  ASSERT_FALSE(xs.write("/ab", "1"));  // a sibling with a common prefix: not a descendant
  const auto ev = drain(xs);
  ASSERT_EQ(ev.size(), 2U);
  EXPECT_EQ(ev[0].path, "/a");
  EXPECT_EQ(ev[1].path, "/a/b");
}

TEST(MemoryXenStore, RmRemovesTheSubtreeAndFiresWatchesBelowIt) {
  MemoryXenStore xs;
  ASSERT_FALSE(xs.write("/a/b/c", "1"));
  ASSERT_FALSE(xs.watch("/a/b/c", "t"));
  drain(xs);
  ASSERT_FALSE(xs.rm("/a"));
  EXPECT_FALSE(xs.exists("/a/b/c"));
  const auto ev = drain(xs);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].path, "/a/b/c");
  EXPECT_EQ(xs.rm("/a"), std::errc::no_such_file_or_directory);
}

TEST(MemoryXenStore, UnwatchDropsQueuedEvents) {
  MemoryXenStore xs;
  ASSERT_FALSE(xs.watch("/a", "t"));
  ASSERT_FALSE(xs.unwatch("/a", "t"));
  EXPECT_TRUE(drain(xs).empty());
  EXPECT_EQ(xs.unwatch("/a", "t"), std::errc::no_such_file_or_directory);
}

TEST(MemoryXenStore, TransactRetriesFailedCommits) {
  MemoryXenStore xs;
  xs.fail_next_commits(3);
  int runs = 0;
  EXPECT_FALSE(hv::transact(xs, [&](hv::XsTx tx) {
    ++runs;
    return xs.write("/k", "v", tx);
  }));
  EXPECT_EQ(runs, 4);
}

}  // namespace
}  // namespace unetback::testing
