#include "common/hv/xen/xen_copy_segment.hpp"

#include "common/wire/grant.hpp"

namespace unetback::hv {
namespace {

// The union is nested in the segment struct when the C header is read as C++.
using CopyPtr = decltype(xengnttab_grant_copy_segment_t::source);

/// One side; returns the status that refuses the segment, if any.
std::optional<std::int16_t> convert_side(const GrantCopyPtr& in, std::uint16_t len,
                                         std::uint16_t gref_flag, CopyPtr& out,
                                         std::uint16_t& flags) {
  if (!in.foreign) {
    if (in.virt == nullptr) return GNTST_bad_virt_addr;
    out.virt = in.virt;
    return std::nullopt;
  }
  // GNTTABOP_copy: a foreign side must stay inside its granted page.
  if (std::size_t{in.offset} + len > kPageSize) return GNTST_bad_copy_arg;
  out.foreign.ref = in.ref.value();
  out.foreign.offset = in.offset;
  out.foreign.domid = in.domid.value();
  flags |= gref_flag;
  return std::nullopt;
}

}  // namespace

std::optional<std::int16_t> to_xen_copy_segment(const GrantCopySegment& in,
                                                xengnttab_grant_copy_segment_t& out) {
  out = {};
  out.len = in.len;
  if (!in.source.foreign && !in.dest.foreign) return GNTST_general_error;
  if (auto st = convert_side(in.source, in.len, GNTCOPY_source_gref, out.source, out.flags))
    return st;
  if (auto st = convert_side(in.dest, in.len, GNTCOPY_dest_gref, out.dest, out.flags)) return st;
  return std::nullopt;
}

void prepare_copy_batch(std::span<GrantCopySegment> segments, XenCopyBatch& batch) {
  batch.segs.clear();
  batch.index.clear();
  for (std::size_t i = 0; i < segments.size(); ++i) {
    xengnttab_grant_copy_segment_t seg;
    if (auto refused = to_xen_copy_segment(segments[i], seg)) {
      segments[i].status = *refused;
      continue;
    }
    batch.segs.push_back(seg);
    batch.index.push_back(i);
  }
}

void apply_copy_statuses(const XenCopyBatch& batch, std::span<GrantCopySegment> segments) {
  for (std::size_t i = 0; i < batch.segs.size(); ++i)
    segments[batch.index[i]].status = batch.segs[i].status;
}

}  // namespace unetback::hv
