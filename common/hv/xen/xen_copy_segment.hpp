// Conversion between the seam's GrantCopySegment and libxengnttab's
// xengnttab_grant_copy_segment, with the checks that must happen before a batch reaches the
// kernel. Pure functions: unit-tested without /dev/xen/gntdev.
//
// Why pre-validate: Linux gntdev (GNTDEV_GRANT_COPY) checks every segment before issuing
// any hypercall and fails the whole ioctl with EINVAL if one foreign side has
// offset + len > XEN_PAGE_SIZE; a local side it cannot pin (a null pointer) fails the ioctl
// with EFAULT. One bad request from a hostile frontend would then fail every other
// packet of the batch. We give such a segment its own status and keep it out of the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

extern "C" {
#include <xengnttab.h>
}

#include "common/hv/grant_table.hpp"

namespace unetback::hv {

/// Fills `out` from `in` (flags GNTCOPY_source_gref / GNTCOPY_dest_gref for each foreign
/// side). Returns nullopt when the segment may be submitted, otherwise the GNTST_* status it
/// gets without being submitted: GNTST_general_error when neither side is foreign (not a
/// grant copy at all), GNTST_bad_copy_arg when a foreign side has offset + len > 4096,
/// GNTST_bad_virt_addr when a local side is null.
[[nodiscard]] std::optional<std::int16_t> to_xen_copy_segment(const GrantCopySegment& in,
                                                              xengnttab_grant_copy_segment_t& out);

/// The segments of one call as the kernel gets them. Capacity is reserved once so that
/// preparing a call on the data path allocates nothing.
struct XenCopyBatch {
  std::vector<xengnttab_grant_copy_segment_t> segs;  // submitted segments
  std::vector<std::size_t> index;                    // segs[i] is segments[index[i]]

  explicit XenCopyBatch(std::size_t capacity) {
    segs.reserve(capacity);
    index.reserve(capacity);
  }
};

/// Converts `segments` into `batch` (cleared first). Segments refused by
/// to_xen_copy_segment() get their status now and are left out.
void prepare_copy_batch(std::span<GrantCopySegment> segments, XenCopyBatch& batch);

/// Writes the kernel's per-segment status back to the segments they came from.
void apply_copy_statuses(const XenCopyBatch& batch, std::span<GrantCopySegment> segments);

}  // namespace unetback::hv
