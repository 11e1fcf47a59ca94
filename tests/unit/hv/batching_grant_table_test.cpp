// BatchingGrantTable: copy() is split into calls of at most N segments (one GNTTABOP_copy
// each, as netback batches its copy ops per ring pass) and counted.
#include <cstdint>
#include <functional>
#include <gtest/gtest.h>
#include <vector>

#include "common/hv/grant_table.hpp"
#include "common/wire/grant.hpp"

namespace unetback::hv {
namespace {

/// A GrantTable whose "hypercall" records each call and lets the test decide statuses.
class RecordingGrantTable final : public BatchingGrantTable {
 public:
  using Call = std::function<bool(std::size_t call_no, std::span<GrantCopySegment>)>;

  RecordingGrantTable(std::size_t batch, Call call)
      : BatchingGrantTable(batch), call_(std::move(call)) {}

  Result<MappedGrants> map(DomId, std::span<const GrantRef>, Access) override {
    return std::errc::not_supported;
  }
  void unmap(std::byte*, std::size_t) noexcept override {}

  std::vector<std::size_t> call_sizes;
  std::vector<std::uint16_t> first_len;  // len of each call's first segment: which slice

 protected:
  bool copy_call(std::span<GrantCopySegment> segments) noexcept override {
    call_sizes.push_back(segments.size());
    first_len.push_back(segments.front().len);
    return call_(call_sizes.size() - 1, segments);
  }

 private:
  Call call_;
};

bool all_okay(std::size_t, std::span<GrantCopySegment> segs) {
  for (auto& s : segs) s.status = GNTST_okay;
  return true;
}

/// Segments tagged by their index in `len` so a call's slice can be identified.
std::vector<GrantCopySegment> numbered_segments(std::size_t n) {
  std::vector<GrantCopySegment> segs(n);
  for (std::size_t i = 0; i < n; ++i) {
    segs[i].len = static_cast<std::uint16_t>(i);
    segs[i].status = 99;  // not a GNTST value: shows whether copy() wrote a status
  }
  return segs;
}

TEST(BatchingGrantTable, SplitsIntoCallsOfAtMostBatchSize) {
  RecordingGrantTable gt(64, all_okay);
  auto segs = numbered_segments(130);
  gt.copy(segs);
  EXPECT_EQ(gt.call_sizes, (std::vector<std::size_t>{64, 64, 2}));
  EXPECT_EQ(gt.first_len, (std::vector<std::uint16_t>{0, 64, 128}));
  const auto stats = gt.copy_stats();
  EXPECT_EQ(stats.calls, 3u);
  EXPECT_EQ(stats.segments, 130u);
  EXPECT_EQ(stats.failed, 0u);
  for (const auto& s : segs) EXPECT_EQ(s.status, GNTST_okay);
}

TEST(BatchingGrantTable, ExactMultipleOfBatchMakesNoEmptyCall) {
  RecordingGrantTable gt(64, all_okay);
  auto segs = numbered_segments(128);
  gt.copy(segs);
  EXPECT_EQ(gt.call_sizes, (std::vector<std::size_t>{64, 64}));
}

TEST(BatchingGrantTable, EmptyCopyMakesNoCall) {
  RecordingGrantTable gt(64, all_okay);
  gt.copy({});
  EXPECT_TRUE(gt.call_sizes.empty());
  EXPECT_EQ(gt.copy_stats().calls, 0u);
  EXPECT_EQ(gt.copy_stats().segments, 0u);
}

TEST(BatchingGrantTable, BatchOfOneMakesOneCallPerSegment) {
  RecordingGrantTable gt(1, all_okay);
  auto segs = numbered_segments(5);
  gt.copy(segs);
  EXPECT_EQ(gt.call_sizes, (std::vector<std::size_t>(5, 1)));
  EXPECT_EQ(gt.first_len, (std::vector<std::uint16_t>{0, 1, 2, 3, 4}));
}

TEST(BatchingGrantTable, WholeCallFailureMarksEachOfItsSegmentsGeneralError) {
  // The second call fails as a whole (gntdev returned an error for the ioctl) without
  // writing any status; the others succeed.
  RecordingGrantTable gt(64, [](std::size_t call_no, std::span<GrantCopySegment> segs) {
    if (call_no == 1) return false;
    return all_okay(call_no, segs);
  });
  auto segs = numbered_segments(130);
  gt.copy(segs);
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::int16_t want = (i >= 64 && i < 128) ? GNTST_general_error : GNTST_okay;
    EXPECT_EQ(segs[i].status, want) << "segment " << i;
  }
  EXPECT_EQ(gt.copy_stats().failed, 64u);
  EXPECT_EQ(gt.copy_stats().calls, 3u);
}

TEST(BatchingGrantTable, StatsCountFailedSegmentsAcrossCopies) {
  // Every third segment (by its tag) has a revoked grant.
  RecordingGrantTable gt(4, [](std::size_t, std::span<GrantCopySegment> segs) {
    for (auto& s : segs) s.status = (s.len % 3 == 0) ? GNTST_bad_gntref : GNTST_okay;
    return true;
  });
  auto first = numbered_segments(10);  // tags 0,3,6,9 fail
  gt.copy(first);
  EXPECT_EQ(first[3].status, GNTST_bad_gntref);
  EXPECT_EQ(first[4].status, GNTST_okay);
  auto stats = gt.copy_stats();
  EXPECT_EQ(stats.calls, 3u);
  EXPECT_EQ(stats.segments, 10u);
  EXPECT_EQ(stats.failed, 4u);

  auto second = numbered_segments(2);  // tag 0 fails
  gt.copy(second);
  stats = gt.copy_stats();
  EXPECT_EQ(stats.calls, 4u);
  EXPECT_EQ(stats.segments, 12u);
  EXPECT_EQ(stats.failed, 5u);
}

TEST(BatchingGrantTable, ZeroBatchSizeIsASetupError) {
  EXPECT_THROW(RecordingGrantTable(0, all_okay), SetupError);
}

}  // namespace
}  // namespace unetback::hv
