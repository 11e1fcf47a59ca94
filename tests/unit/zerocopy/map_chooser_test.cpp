// MapChooser: tx-map auto goes the way its own measurements make cheaper, keeps trying the
// other one now and then, is not swayed by one slow pass, and follows a host that changes.
#include "common/zerocopy/map_chooser.hpp"

#include <gtest/gtest.h>

namespace unetback::zerocopy {
namespace {

/// Runs `passes` passes of `bytes` each, costing `map_ns` / `copy_ns` per byte; returns how
/// many of them mapped.
int run(MapChooser& c, int passes, double map_ns, double copy_ns, std::uint64_t bytes = 12000) {
  int mapped = 0;
  for (int i = 0; i < passes; ++i) {
    const bool m = c.map_this_pass();
    mapped += m ? 1 : 0;
    c.record(m, bytes,
             static_cast<std::uint64_t>((m ? map_ns : copy_ns) * static_cast<double>(bytes)));
  }
  return mapped;
}

TEST(MapChooser, TriesBothWaysBeforeItChooses) {
  MapChooser c;
  const int mapped = run(c, 2 * MapChooser::kWarmupSamples, 1.0, 2.0);
  EXPECT_EQ(mapped, static_cast<int>(MapChooser::kWarmupSamples));
  EXPECT_EQ(c.mapped_passes(), MapChooser::kWarmupSamples);
  EXPECT_EQ(c.copied_passes(), MapChooser::kWarmupSamples);
}

TEST(MapChooser, GoesTheCheaperWayAndExploresTheOtherOnePassIn32) {
  MapChooser c;
  run(c, 16, 10.0, 1.0);  // warm-up: mapping ten times dearer
  const int mapped = run(c, 32 * 10, 10.0, 1.0);
  EXPECT_EQ(mapped, 10) << "one exploring pass per " << MapChooser::kExploreEvery;
  EXPECT_EQ(c.copy_ns_per_kib(), 1024u);
  EXPECT_EQ(c.map_ns_per_kib(), 10240u);

  MapChooser d;
  run(d, 16, 1.0, 10.0);
  EXPECT_EQ(run(d, 32 * 10, 1.0, 10.0), 32 * 10 - 10);
}

// Each timed pass costs two clock reads (syscalls in a PV dom0 without a vDSO clock).
TEST(MapChooser, TimesWarmUpAndExploringPassesAndOneInEightOfTheRest) {
  MapChooser c;
  for (std::uint32_t i = 0; i < 2 * MapChooser::kWarmupSamples; ++i) {
    const bool m = c.map_this_pass();
    EXPECT_TRUE(c.time_this_pass()) << "warm-up pass " << i;
    c.record(m, 12000, m ? 12000 : 24000);
  }
  int timed = 0, timed_exploring = 0;
  for (std::uint32_t i = 0; i < 32 * MapChooser::kExploreEvery; ++i) {
    const bool m = c.map_this_pass();  // mapping is the cheaper way
    if (!c.time_this_pass()) continue;
    ++timed;
    if (!m) ++timed_exploring;
    c.record(m, 12000, m ? 12000 : 24000);
  }
  EXPECT_EQ(timed_exploring, 32) << "every exploring pass is timed";
  const int cheaper = 32 * static_cast<int>(MapChooser::kExploreEvery) - 32;
  EXPECT_EQ(timed - timed_exploring, cheaper / static_cast<int>(MapChooser::kTimeEvery));
  EXPECT_LT(c.map_ns_per_kib(), c.copy_ns_per_kib());

  MapChooser always(MapMode::always);
  int always_timed = 0;
  for (std::uint32_t i = 0; i < 10 * MapChooser::kTimeEvery; ++i) {
    (void)always.map_this_pass();
    always_timed += always.time_this_pass() ? 1 : 0;
  }
  EXPECT_EQ(always_timed, 10) << "a fixed way is timed too, for its counter";
}

TEST(MapChooser, OneSlowPassDoesNotTurnTheChoice) {
  MapChooser c;
  run(c, 16, 1.0, 2.0);
  // A mapped pass preempted for 50 ms: counted as at most 4x the average.
  c.record(true, 12000, 50'000'000);
  EXPECT_LT(c.map_ns_per_kib(), c.copy_ns_per_kib());
  EXPECT_TRUE(c.map_this_pass());
}

TEST(MapChooser, FollowsAHostWhoseCostsChange) {
  MapChooser c;
  run(c, 16 + 320, 1.0, 3.0);  // mapping is cheaper
  EXPECT_TRUE(c.map_this_pass());
  // The host changes (dom0 loaded: every map now dearer); only exploring passes see it, and
  // within a few hundred passes the choice has turned.
  run(c, 32 * 40, 8.0, 3.0);
  EXPECT_GT(c.map_ns_per_kib(), c.copy_ns_per_kib());
  EXPECT_EQ(run(c, 32, 8.0, 3.0), 1) << "copies, but for one exploring pass";
}

TEST(MapChooser, PassesWithoutMappableBytesAreNoSamples) {
  MapChooser c;
  c.record(true, 0, 1000);
  EXPECT_EQ(c.mapped_passes(), 0u);
  EXPECT_EQ(c.map_ns_per_kib(), 0u);
}

TEST(MapChooser, AlwaysAndNeverAreFixed) {
  MapChooser always(MapMode::always), never(MapMode::never);
  EXPECT_EQ(run(always, 100, 100.0, 1.0), 100);
  EXPECT_EQ(run(never, 100, 1.0, 100.0), 0);
}

TEST(MapChooser, ModeNamesRoundTrip) {
  for (MapMode m : {MapMode::auto_choice, MapMode::always, MapMode::never})
    EXPECT_EQ(parse_map_mode(map_mode_name(m)), m);
  EXPECT_FALSE(parse_map_mode("sometimes"));
}

}  // namespace
}  // namespace unetback::zerocopy
