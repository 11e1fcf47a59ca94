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

// What a call costs under Xen, counted by gntdev's rule (Linux drivers/xen/gntdev.c): a
// segment is one GNTTABOP_copy op per local page it touches, and a hypercall takes 16 ops.
/// Three page-aligned local pages.
std::byte* local_pages() {
  alignas(4096) static std::byte pages[3 * 4096];
  return pages;
}

GrantCopySegment to_guest(std::size_t local_offset, std::uint16_t len) {
  GrantCopySegment s;
  s.source = GrantCopyPtr::local(local_pages() + local_offset);
  s.dest = GrantCopyPtr::granted(DomId{1}, GrantRef{8}, 0);
  s.len = len;
  return s;
}

TEST(GntdevOps, ASegmentIsOneOpPerLocalPageItTouches) {
  EXPECT_EQ(gntdev_ops(to_guest(0, 4096)), 1u);
  EXPECT_EQ(gntdev_ops(to_guest(4000, 96)), 1u);  // ends on the page's last byte
  EXPECT_EQ(gntdev_ops(to_guest(4000, 97)), 2u);  // one byte into the next page
  EXPECT_EQ(gntdev_ops(to_guest(12, 4096)), 2u);  // a whole page's worth, misaligned
  GrantCopySegment from_guest;
  from_guest.source = GrantCopyPtr::granted(DomId{1}, GrantRef{9}, 2048);
  from_guest.dest = GrantCopyPtr::local(local_pages() + 4096 + 3000);
  from_guest.len = 2048;
  EXPECT_EQ(gntdev_ops(from_guest), 2u);  // the local side is the destination here
  GrantCopySegment guest_to_guest;
  guest_to_guest.source = GrantCopyPtr::granted(DomId{1}, GrantRef{9}, 0);
  guest_to_guest.dest = GrantCopyPtr::granted(DomId{2}, GrantRef{3}, 0);
  guest_to_guest.len = 4096;
  EXPECT_EQ(gntdev_ops(guest_to_guest), 1u);
}

TEST(GntdevOps, EachCallIssuesOneHypercallPerSixteenOpsOfItsOwn) {
  RecordingGrantTable gt(64, all_okay);
  // 17 page-aligned segments (a 64 KiB GSO frame and its headers): 17 ops, 2 hypercalls.
  std::vector<GrantCopySegment> frame(17, to_guest(0, 4096));
  gt.copy(frame);
  auto stats = gt.copy_stats();
  EXPECT_EQ(stats.ops, 17u);
  EXPECT_EQ(stats.hypercalls, 2u);
  // The same 17 a few bytes off the page: each touches two local pages, 34 ops, 3 hypercalls.
  std::vector<GrantCopySegment> skewed(17, to_guest(12, 4096));
  gt.copy(skewed);
  stats = gt.copy_stats();
  EXPECT_EQ(stats.ops, 17u + 34u);
  EXPECT_EQ(stats.hypercalls, 2u + 3u);
  // A call's ops never share a hypercall with another call's: 3 calls of 2 ops, 3 hypercalls.
  RecordingGrantTable small(2, all_okay);
  std::vector<GrantCopySegment> six(6, to_guest(0, 100));
  small.copy(six);
  EXPECT_EQ(small.copy_stats().ops, 6u);
  EXPECT_EQ(small.copy_stats().hypercalls, 3u);
}

}  // namespace
}  // namespace unetback::hv
