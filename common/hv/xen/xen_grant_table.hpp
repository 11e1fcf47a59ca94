// XenGrantTable: GrantTable over libxengnttab (/dev/xen/gntdev), for a backend.
//
// copy() issues one GNTTABOP_copy ioctl per batch of at most max_segments_per_call segments
// (BatchingGrantTable splits); segments the kernel would reject for the whole batch are
// refused beforehand with their own status (see xen_copy_segment.hpp). map() maps through
// gntdev, all or nothing.
//
// Threads: copy() works in one scratch batch (sized once, so the data path allocates
// nothing) and BatchingGrantTable's counters are plain integers, so copy() calls must not
// overlap; map() and unmap() may be called from any thread (gntdev serialises them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "common/hv/grant_table.hpp"
#include "common/hv/xen/xen_copy_segment.hpp"

namespace unetback::hv {

class XenGrantTable final : public BatchingGrantTable {
 public:
  /// Opens /dev/xen/gntdev. `max_grants` (xengnttab_set_max_grants) bounds how many grants
  /// this handle may map at once, where the kernel enforces a per-handle limit. Throws
  /// SetupError naming the device when it cannot be opened.
  explicit XenGrantTable(std::size_t max_segments_per_call,
                         std::optional<std::uint32_t> max_grants = std::nullopt);
  /// Closes the handle. Every MappedGrants must have been released before.
  ~XenGrantTable() override;
  XenGrantTable(const XenGrantTable&) = delete;
  XenGrantTable& operator=(const XenGrantTable&) = delete;

  Result<MappedGrants> map(DomId granter, std::span<const GrantRef> refs, Access access) override;
  void unmap(std::byte* addr, std::size_t count) noexcept override;

 protected:
  bool copy_call(std::span<GrantCopySegment> segments) noexcept override;

 private:
  struct Closer {
    void operator()(xengnttab_handle* h) const noexcept;
  };
  std::unique_ptr<xengnttab_handle, Closer> handle_;
  XenCopyBatch batch_;  // scratch for copy_call, sized once
};

}  // namespace unetback::hv
