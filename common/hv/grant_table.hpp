// GrantTable: the backend's view of other domains' grants (libxengnttab's role).
//
// copy() is one batch of GNTTABOP_copy segments with a status per segment; map() maps a
// set of grant refs of one domain into contiguous local memory until the returned
// MappedGrants is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hv {

inline constexpr std::size_t kPageSize = 4096;

enum class Access : std::uint8_t { read_only, read_write };

/// One side of a copy segment: local memory, or (offset into) a page granted by `domid`.
struct GrantCopyPtr {
  void* virt = nullptr;  // local side
  GrantRef ref{};        // foreign side
  std::uint16_t offset = 0;
  DomId domid{};
  bool foreign = false;

  static GrantCopyPtr local(void* p) { return GrantCopyPtr{p, {}, 0, {}, false}; }
  static GrantCopyPtr granted(DomId d, GrantRef r, std::uint16_t off) {
    return GrantCopyPtr{nullptr, r, off, d, true};
  }
};

/// A copy segment, as xengnttab_grant_copy_segment: at least one side should be foreign;
/// the foreign side must satisfy offset + len <= 4096 (else GNTST_bad_copy_arg).
struct GrantCopySegment {
  GrantCopyPtr source;
  GrantCopyPtr dest;
  std::uint16_t len = 0;
  std::int16_t status = 0;  // GNTST_*; written by GrantTable::copy
};

/// Counters of copy work, so tests and benchmarks can report segments per call and what a
/// call costs under Xen. Linux's gntdev (IOCTL_GNTDEV_GRANT_COPY, as in 6.1) turns each
/// segment into one GNTTABOP_copy op per local page the segment touches (it pins each such
/// page), a segment between two grants into one op, and issues one hypercall per
/// kGntdevOpsPerHypercall ops (GNTDEV_COPY_BATCH), whatever the call's size. `ops` and
/// `hypercalls` are counted by that rule on every hypervisor, xensim too.
struct GrantCopyStats {
  std::uint64_t calls = 0;       // copy calls (one gntdev ioctl each on Xen)
  std::uint64_t segments = 0;    // segments submitted
  std::uint64_t failed = 0;      // segments whose status was not GNTST_okay
  std::uint64_t ops = 0;         // GNTTABOP_copy ops gntdev makes of the segments
  std::uint64_t hypercalls = 0;  // GNTTABOP_copy hypercalls gntdev issues for them
};

/// Ops gntdev puts in one GNTTABOP_copy hypercall (Linux drivers/xen/gntdev.c).
inline constexpr std::size_t kGntdevOpsPerHypercall = 16;

/// The GNTTABOP_copy ops gntdev makes of one segment: one per local page in its local range,
/// one if both sides are grants (a local-to-local segment is refused by gntdev: counted 1).
[[nodiscard]] std::size_t gntdev_ops(const GrantCopySegment& segment);

class GrantUnmapper;

/// Grants of one domain mapped into local memory, in the order of the refs given to map():
/// either page after page in one region (Xen's gntdev), or each page wherever the table has it
/// (xensim, whose backend already holds a view of every granter's memory: a map then only pins
/// the grants, with no mmap per page). The destructor unmaps them (GTF_reading/GTF_writing
/// clear then). Move-only; the GrantTable that made it must outlive it.
class MappedGrants {
 public:
  MappedGrants() = default;
  /// One contiguous region of `count` pages at `addr`.
  MappedGrants(GrantUnmapper* owner, std::byte* addr, std::size_t count, Access access)
      : owner_(owner), addr_(addr), count_(count), access_(access) {
    count_mapped(static_cast<std::ptrdiff_t>(count_));
  }
  /// Pages anywhere; `key` is what unmap() is called with (opaque to the user).
  MappedGrants(GrantUnmapper* owner, std::byte* key, std::vector<std::byte*> pages, Access access)
      : owner_(owner), addr_(key), count_(pages.size()), access_(access), pages_(std::move(pages)) {
    count_mapped(static_cast<std::ptrdiff_t>(count_));
  }
  ~MappedGrants() { reset(); }
  MappedGrants(MappedGrants&& o) noexcept { *this = std::move(o); }
  MappedGrants& operator=(MappedGrants&& o) noexcept;
  MappedGrants(const MappedGrants&) = delete;
  MappedGrants& operator=(const MappedGrants&) = delete;

  /// The first page (with one page, or a contiguous mapping, the whole mapping).
  [[nodiscard]] std::byte* data() const { return pages_.empty() ? addr_ : pages_.front(); }
  [[nodiscard]] std::byte* page(std::size_t i) const {
    return pages_.empty() ? addr_ + i * kPageSize : pages_[i];
  }
  [[nodiscard]] std::size_t count() const { return count_; }
  [[nodiscard]] Access access() const { return access_; }
  [[nodiscard]] bool empty() const { return count_ == 0; }

  /// Unmaps now.
  void reset();

 private:
  static void count_mapped(std::ptrdiff_t pages);

  GrantUnmapper* owner_ = nullptr;
  std::byte* addr_ = nullptr;  // the region, or the key of a scattered mapping
  std::size_t count_ = 0;
  Access access_ = Access::read_only;
  std::vector<std::byte*> pages_;  // empty for a contiguous region
};

/// Grant pages mapped right now by this process (every MappedGrants alive, whatever table made
/// it): what a leak check compares before and after (unetbackd reports it in `stats`).
[[nodiscard]] std::size_t mapped_grant_pages();

/// What a MappedGrants calls to release its mapping.
class GrantUnmapper {
 public:
  virtual void unmap(std::byte* addr, std::size_t count) noexcept = 0;

 protected:
  ~GrantUnmapper() = default;
};

class GrantTable : public GrantUnmapper {
 public:
  virtual ~GrantTable() = default;

  /// Performs every segment and writes each one's GNTST_* status. Issues
  /// ceil(n / max_segments_per_call()) calls. Never throws; a failure of a whole call
  /// marks each of its segments GNTST_general_error.
  virtual void copy(std::span<GrantCopySegment> segments) = 0;

  /// Maps `refs` granted by `granter`, all or nothing (as libxengnttab does).
  virtual Result<MappedGrants> map(DomId granter, std::span<const GrantRef> refs,
                                   Access access) = 0;

  [[nodiscard]] virtual GrantCopyStats copy_stats() const = 0;
};

/// Shared part of every GrantTable: splits copy() into calls of at most
/// `max_segments_per_call` segments and keeps the statistics.
class BatchingGrantTable : public GrantTable {
 public:
  explicit BatchingGrantTable(std::size_t max_segments_per_call);

  void copy(std::span<GrantCopySegment> segments) final;
  [[nodiscard]] GrantCopyStats copy_stats() const final;
  [[nodiscard]] std::size_t max_segments_per_call() const { return max_per_call_; }

 protected:
  /// One call with at most max_segments_per_call() segments. Writes each status; returns
  /// false if the call as a whole failed (then every status is set to general_error).
  virtual bool copy_call(std::span<GrantCopySegment> segments) noexcept = 0;

 private:
  std::size_t max_per_call_;
  std::uint64_t calls_ = 0, segments_ = 0, failed_ = 0, ops_ = 0, hypercalls_ = 0;
};

}  // namespace unetback::hv
