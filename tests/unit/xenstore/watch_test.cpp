// Watches: initial event, subtree matching, removal, special events, relative paths,
// permission filtering and transactions (docs/misc/xenstore.txt, WATCH).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/xenstore/core_harness.hpp"

using namespace unetback;
using namespace unetback::xensim;
using namespace unetback::xensim::test;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace {

class XenstoreWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    h.core.create_domain_nodes(kDom1, "guest1");
    h.core.domain_introduced(kDom1);
    d0 = h.connect(kDom0);
    d1 = h.connect(kDom1);
  }
  CoreHarness h;  // NOLINT(readability-identifier-naming): shorthand
  ConnId d0, d1;  // NOLINT(readability-identifier-naming): shorthand
};

TEST_F(XenstoreWatch, WatchRepliesOkThenFiresInitialEvent) {
  h.core.handle(
      d0, XsMessage{{static_cast<std::uint32_t>(XsType::watch), 9, 0, 0}, z("/w") + z("tok")});
  ASSERT_EQ(h.replies[d0].size(), 1u);
  EXPECT_EQ(h.replies[d0][0].payload, z("OK"));
  EXPECT_EQ(h.replies[d0][0].req_id, 9u);
  EXPECT_THAT(h.take_events(d0), ElementsAre("/w|tok"));
}

TEST_F(XenstoreWatch, FiresForNodeAndDescendantsOnly) {
  h.watch(d0, "/a/b", "t");
  h.take_events(d0);
  h.write(d0, "/a/b", "1");
  h.write(d0, "/a/b/c/d", "2");
  h.write(d0, "/a/bc", "3");
  h.write(d0, "/a", "4");
  EXPECT_THAT(h.take_events(d0), ElementsAre("/a/b|t", "/a/b/c/d|t"));
}

TEST_F(XenstoreWatch, RootWatchSeesEverything) {
  h.watch(d0, "/", "all");
  h.take_events(d0);
  h.write(d0, "/q", "1");
  EXPECT_THAT(h.take_events(d0), ElementsAre("/q|all"));
}

TEST_F(XenstoreWatch, RmFiresForAncestorsAndForWatchesBelowTheRemovedNode) {
  h.write(d0, "/r/a/b", "1");
  h.watch(d0, "/r", "up");
  h.watch(d0, "/r/a/b", "child");
  h.watch(d0, "/r/a/never", "missing");
  h.take_events(d0);
  h.rm(d0, "/r/a");
  EXPECT_THAT(h.take_events(d0), ElementsAre("/r/a|up", "/r/a/b|child", "/r/a/never|missing"));
}

TEST_F(XenstoreWatch, RmOfMissingNodeFiresNothing) {
  h.write(d0, "/r", "");
  h.watch(d0, "/r", "t");
  h.take_events(d0);
  h.rm(d0, "/r/none");
  EXPECT_THAT(h.take_events(d0), IsEmpty());
}

TEST_F(XenstoreWatch, SetPermsFires) {
  h.write(d0, "/p", "");
  h.watch(d0, "/p", "t");
  h.take_events(d0);
  h.set_perms(d0, "/p", {"n0", "r1"});
  EXPECT_THAT(h.take_events(d0), ElementsAre("/p|t"));
}

TEST_F(XenstoreWatch, EventsFromTransactionFireAtCommitOnly) {
  h.watch(d0, "/tx", "t");
  h.take_events(d0);
  const auto tx = h.tx_start(d0);
  h.write(d0, "/tx/a", "1", tx);
  h.write(d0, "/tx/b", "2", tx);
  EXPECT_THAT(h.take_events(d0), IsEmpty());
  ASSERT_FALSE(h.tx_end(d0, tx, true).is_error());
  EXPECT_THAT(h.take_events(d0), ElementsAre("/tx/a|t", "/tx/b|t"));
}

TEST_F(XenstoreWatch, AbortedOrConflictedTransactionFiresNothing) {
  h.watch(d0, "/tx", "t");
  const auto tx = h.tx_start(d0);
  h.read(d0, "/tx", tx);
  h.write(d0, "/tx/a", "1", tx);
  h.write(d0, "/tx", "x");  // conflict
  h.take_events(d0);
  EXPECT_EQ(h.tx_end(d0, tx, true).error(), "EAGAIN");
  EXPECT_THAT(h.take_events(d0), IsEmpty());
}

TEST_F(XenstoreWatch, RelativeWatchReportsRelativePaths) {
  h.watch(d1, "data", "rel");
  EXPECT_THAT(h.take_events(d1), ElementsAre("data|rel"));
  h.write(d1, "data/k", "v");
  EXPECT_THAT(h.take_events(d1), ElementsAre("data/k|rel"));
  h.watch(d1, "/local/domain/1/data", "abs");
  h.take_events(d1);
  h.write(d1, "data/k", "w");
  EXPECT_THAT(h.take_events(d1), ElementsAre("data/k|rel", "/local/domain/1/data/k|abs"));
}

TEST_F(XenstoreWatch, EventsAreOnlyDeliveredForReadableNodes) {
  h.watch(d1, "/", "all");
  h.take_events(d1);
  h.write(d0, "/hidden/x", "1");
  EXPECT_THAT(h.take_events(d1), IsEmpty());
  h.write(d0, "/local/domain/1/device/vif/0/state", "1");
  EXPECT_THAT(h.take_events(d1), ElementsAre("/local/domain/1/device/vif/0/state|all"));
}

TEST_F(XenstoreWatch, WatcherLosingReadAccessStillSeesThePermissionChange) {
  h.write(d0, "/local/domain/1/device/x", "");
  h.watch(d1, "/local/domain/1/device/x", "t");
  h.take_events(d1);
  h.set_perms(d0, "/local/domain/1/device", {"n0"});
  h.set_perms(d0, "/local/domain/1/device/x", {"n0"});
  EXPECT_THAT(h.take_events(d1), ElementsAre("/local/domain/1/device/x|t"));
  h.write(d0, "/local/domain/1/device/x", "later");
  EXPECT_THAT(h.take_events(d1), IsEmpty());
}

TEST_F(XenstoreWatch, IntroduceAndReleaseDomainFireSpecialWatches) {
  h.watch(d0, "@introduceDomain", "in");
  h.watch(d0, "@releaseDomain", "out");
  EXPECT_THAT(h.take_events(d0), ElementsAre("@introduceDomain|in", "@releaseDomain|out"));
  h.write(d0, "/unrelated", "");
  EXPECT_THAT(h.take_events(d0), IsEmpty());
  auto a = h.request(d0, XsType::introduce, z("5") + z("0") + z("0"));
  EXPECT_EQ(a.payload, z("OK"));
  EXPECT_THAT(h.opened, ElementsAre(DomId{5}));
  EXPECT_THAT(h.take_events(d0), ElementsAre("@introduceDomain|in"));
  EXPECT_EQ(h.request(d0, XsType::is_domain_introduced, z("5")).payload, z("T"));
  EXPECT_EQ(h.request(d0, XsType::release, z("5")).payload, z("OK"));
  EXPECT_THAT(h.closed, ElementsAre(DomId{5}));
  EXPECT_THAT(h.take_events(d0), ElementsAre("@releaseDomain|out"));
  EXPECT_EQ(h.request(d0, XsType::is_domain_introduced, z("5")).payload, z("F"));
  EXPECT_EQ(h.request(d0, XsType::release, z("5")).error(), "ENOENT");
}

TEST_F(XenstoreWatch, DomUDoesNotSeeSpecialEventsUnlessPermitted) {
  h.watch(d1, "@releaseDomain", "out");
  EXPECT_THAT(h.take_events(d1), ElementsAre("@releaseDomain|out")) << "initial event";
  h.core.domain_released(kDom1);
  EXPECT_THAT(h.take_events(d1), IsEmpty());
  h.core.domain_introduced(kDom1);
  h.set_perms(d0, "@releaseDomain", {"n0", "r1"});
  h.core.domain_released(kDom1);
  EXPECT_THAT(h.take_events(d1), ElementsAre("@releaseDomain|out"));
  EXPECT_EQ(h.set_perms(d1, "@releaseDomain", {"r1"}).error(), "EACCES");
}

TEST_F(XenstoreWatch, DuplicateWatchIsEexistAndUnwatchStopsEvents) {
  h.watch(d0, "/u", "t");
  EXPECT_EQ(h.watch(d0, "/u", "t").error(), "EEXIST");
  EXPECT_FALSE(h.watch(d0, "/u", "t2").is_error());
  EXPECT_FALSE(h.request(d0, XsType::unwatch, z("/u") + z("t")).is_error());
  EXPECT_EQ(h.request(d0, XsType::unwatch, z("/u") + z("t")).error(), "ENOENT");
  h.take_events(d0);
  h.write(d0, "/u", "1");
  EXPECT_THAT(h.take_events(d0), ElementsAre("/u|t2"));
}

TEST_F(XenstoreWatch, ResetWatchesDropsWatchesAndTransactions) {
  h.watch(d0, "/rw", "t");
  const auto tx = h.tx_start(d0);
  EXPECT_EQ(h.request(d0, XsType::reset_watches, "").payload, z("OK"));
  h.take_events(d0);
  h.write(d0, "/rw", "1");
  EXPECT_THAT(h.take_events(d0), IsEmpty());
  EXPECT_EQ(h.read(d0, "/", tx).error(), "ENOENT");
}

TEST_F(XenstoreWatch, WatchesOfOtherConnectionsFireToo) {
  auto other = h.connect(kDom0);
  h.watch(other, "/o", "t");
  h.take_events(other);
  h.write(d0, "/o", "1");
  EXPECT_THAT(h.take_events(other), ElementsAre("/o|t"));
  EXPECT_THAT(h.take_events(d0), IsEmpty());
}

TEST_F(XenstoreWatch, MalformedWatchRequestsAreEinval) {
  EXPECT_EQ(h.request(d0, XsType::watch, z("/only")).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::watch, z("/a//b") + z("t")).error(), "EINVAL");
  EXPECT_EQ(h.request(d0, XsType::watch, z("/a") + z("t") + z("x")).error(), "EINVAL");
}

}  // namespace
