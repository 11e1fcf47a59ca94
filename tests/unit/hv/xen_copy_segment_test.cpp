// Conversion of copy segments to libxengnttab's layout, and the checks that keep one bad
// segment from failing a whole GNTDEV_GRANT_COPY batch.
#include "common/hv/xen/xen_copy_segment.hpp"

#include <array>
#include <cstdint>
#include <gtest/gtest.h>
#include <vector>

namespace unetback::hv {
namespace {

std::array<std::byte, 2 * kPageSize> g_local;

GrantCopySegment guest_to_local(std::uint16_t offset, std::uint16_t len) {
  return {GrantCopyPtr::granted(DomId{7}, GrantRef{0x1234}, offset),
          GrantCopyPtr::local(g_local.data()), len, 0};
}

GrantCopySegment local_to_guest(std::uint16_t offset, std::uint16_t len) {
  return {GrantCopyPtr::local(g_local.data() + 100),
          GrantCopyPtr::granted(DomId{9}, GrantRef{77}, offset), len, 0};
}

TEST(XenCopySegment, GuestToLocalSetsSourceGrefAndCopiesBothSides) {
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(guest_to_local(100, 1400), out), std::nullopt);
  EXPECT_EQ(out.flags, GNTCOPY_source_gref);
  EXPECT_EQ(out.source.foreign.ref, 0x1234u);
  EXPECT_EQ(out.source.foreign.offset, 100u);
  EXPECT_EQ(out.source.foreign.domid, 7u);
  EXPECT_EQ(out.dest.virt, g_local.data());
  EXPECT_EQ(out.len, 1400u);
}

TEST(XenCopySegment, LocalToGuestSetsDestGrefAndCopiesBothSides) {
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(local_to_guest(2000, 96), out), std::nullopt);
  EXPECT_EQ(out.flags, GNTCOPY_dest_gref);
  EXPECT_EQ(out.source.virt, g_local.data() + 100);
  EXPECT_EQ(out.dest.foreign.ref, 77u);
  EXPECT_EQ(out.dest.foreign.offset, 2000u);
  EXPECT_EQ(out.dest.foreign.domid, 9u);
  EXPECT_EQ(out.len, 96u);
}

TEST(XenCopySegment, GuestToGuestSetsBothFlags) {
  const GrantCopySegment in{GrantCopyPtr::granted(DomId{1}, GrantRef{10}, 0),
                            GrantCopyPtr::granted(DomId{2}, GrantRef{20}, 8), 64, 0};
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(in, out), std::nullopt);
  EXPECT_EQ(out.flags, GNTCOPY_source_gref | GNTCOPY_dest_gref);
  EXPECT_EQ(out.source.foreign.domid, 1u);
  EXPECT_EQ(out.source.foreign.ref, 10u);
  EXPECT_EQ(out.dest.foreign.domid, 2u);
  EXPECT_EQ(out.dest.foreign.ref, 20u);
  EXPECT_EQ(out.dest.foreign.offset, 8u);
}

TEST(XenCopySegment, NeitherSideGrantedIsAGeneralError) {
  const GrantCopySegment in{GrantCopyPtr::local(g_local.data()),
                            GrantCopyPtr::local(g_local.data() + kPageSize), 10, 0};
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(in, out), GNTST_general_error);
}

TEST(XenCopySegment, ForeignSideMayEndExactlyAtThePageEnd) {
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(guest_to_local(4000, 96), out), std::nullopt);
  EXPECT_EQ(to_xen_copy_segment(local_to_guest(0, 4096), out), std::nullopt);
  EXPECT_EQ(to_xen_copy_segment(local_to_guest(4096, 0), out), std::nullopt);
}

TEST(XenCopySegment, ForeignSideCrossingThePageEndIsBadCopyArg) {
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(guest_to_local(4000, 97), out), GNTST_bad_copy_arg);
  EXPECT_EQ(to_xen_copy_segment(local_to_guest(1, 4096), out), GNTST_bad_copy_arg);
  // A hostile offset alone, with the sum overflowing 16 bits.
  EXPECT_EQ(to_xen_copy_segment(guest_to_local(65535, 1), out), GNTST_bad_copy_arg);
  EXPECT_EQ(to_xen_copy_segment(local_to_guest(8, 65535), out), GNTST_bad_copy_arg);
}

TEST(XenCopySegment, LocalSideMayCrossPages) {
  // Only the granted side is bounded by its page; the local buffer is ordinary memory.
  const GrantCopySegment in{GrantCopyPtr::granted(DomId{7}, GrantRef{1}, 0),
                            GrantCopyPtr::local(g_local.data() + kPageSize - 10), 4096, 0};
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(in, out), std::nullopt);
}

TEST(XenCopySegment, NullLocalSideIsRefusedBeforeTheKernel) {
  const GrantCopySegment in{GrantCopyPtr::granted(DomId{7}, GrantRef{1}, 0),
                            GrantCopyPtr::local(nullptr), 10, 0};
  xengnttab_grant_copy_segment_t out;
  EXPECT_EQ(to_xen_copy_segment(in, out), GNTST_bad_virt_addr);
}

TEST(XenCopyBatch, SubmitsOnlyValidSegmentsAndMapsStatusesBack) {
  std::vector<GrantCopySegment> segs{
      guest_to_local(0, 100),     // 0: ok
      guest_to_local(4090, 100),  // 1: crosses page end
      local_to_guest(0, 60),      // 2: ok
      {GrantCopyPtr::local(g_local.data()), GrantCopyPtr::local(g_local.data()), 1, 0},  // 3
      local_to_guest(100, 200),                                                          // 4: ok
  };
  XenCopyBatch batch(segs.size());
  prepare_copy_batch(segs, batch);
  ASSERT_EQ(batch.segs.size(), 3u);
  EXPECT_EQ(batch.index, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(batch.segs[0].flags, GNTCOPY_source_gref);
  EXPECT_EQ(batch.segs[1].dest.foreign.offset, 0u);
  EXPECT_EQ(batch.segs[2].dest.foreign.offset, 100u);
  EXPECT_EQ(segs[1].status, GNTST_bad_copy_arg);
  EXPECT_EQ(segs[3].status, GNTST_general_error);

  // What the kernel would write: the middle one had a revoked grant.
  batch.segs[0].status = GNTST_okay;
  batch.segs[1].status = GNTST_bad_gntref;
  batch.segs[2].status = GNTST_permission_denied;
  apply_copy_statuses(batch, segs);
  EXPECT_EQ(segs[0].status, GNTST_okay);
  EXPECT_EQ(segs[1].status, GNTST_bad_copy_arg);
  EXPECT_EQ(segs[2].status, GNTST_bad_gntref);
  EXPECT_EQ(segs[3].status, GNTST_general_error);
  EXPECT_EQ(segs[4].status, GNTST_permission_denied);
}

TEST(XenCopyBatch, PreparingAgainStartsFromAnEmptyBatch) {
  std::vector<GrantCopySegment> first{guest_to_local(0, 1), guest_to_local(0, 2)};
  std::vector<GrantCopySegment> second{local_to_guest(0, 3)};
  XenCopyBatch batch(2);
  prepare_copy_batch(first, batch);
  prepare_copy_batch(second, batch);
  ASSERT_EQ(batch.segs.size(), 1u);
  EXPECT_EQ(batch.segs[0].len, 3u);
  EXPECT_EQ(batch.index, (std::vector<std::size_t>{0}));
}

TEST(XenCopyBatch, AllSegmentsRefusedLeavesNothingToSubmit) {
  std::vector<GrantCopySegment> segs{guest_to_local(4095, 2), local_to_guest(4096, 1)};
  XenCopyBatch batch(2);
  prepare_copy_batch(segs, batch);
  EXPECT_TRUE(batch.segs.empty());
  EXPECT_EQ(segs[0].status, GNTST_bad_copy_arg);
  EXPECT_EQ(segs[1].status, GNTST_bad_copy_arg);
}

}  // namespace
}  // namespace unetback::hv
