// SimGrantSharer: xensim's GrantSharer, run in the granting domain (a domU process). It
// owns the domain's memory and grant table (memfds the broker made for the domain) and
// grants pages as a guest kernel does (gnttab_grant_foreign_access): write the frame and
// the domid, then the flags with a release store, so a mapper that sees GTF_permit_access
// sees the rest.
//
// Revoking follows Linux's gnttab_end_foreign_access: clear the flags with a
// compare-and-swap only if GTF_reading/GTF_writing are clear; a page its peer still holds
// goes on a deferred list, is retried on later share() calls and SharedPages releases, and
// neither its frame nor its gref is reused before the revoke succeeds.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common/hv/grant_sharer.hpp"
#include "common/hv/sim/mapped_region.hpp"
#include "common/hv/sim/shared_grant_entry.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::hv::sim {

/// Grant refs 0..7 are never handed out: Xen's toolstack and Linux reserve the first
/// entries (GNTTAB_NR_RESERVED_ENTRIES; console and xenstore rings use 0 and 1).
inline constexpr std::uint32_t kReservedGrantEntries = 8;

class SimGrantSharer final : public GrantSharer {
 public:
  /// Maps our memory (`nr_frames` frames of `memory_fd`) and grant table (`nr_entries` v1
  /// entries of `grant_fd`). Throws SetupError if they cannot be mapped.
  SimGrantSharer(DomId self, const UniqueFd& memory_fd, std::uint32_t nr_frames,
                 const UniqueFd& grant_fd, std::uint32_t nr_entries);
  /// Every SharedPages it made must be gone by then.
  ~SimGrantSharer() override = default;
  SimGrantSharer(const SimGrantSharer&) = delete;
  SimGrantSharer& operator=(const SimGrantSharer&) = delete;

  /// ENOSPC when there are not `count` free frames and grant refs (after retrying the
  /// deferred revokes); EINVAL for count 0.
  Result<SharedPages> share(DomId peer, std::size_t count, Access access) override;
  [[nodiscard]] GrantUse in_use(GrantRef ref) const override;

  [[nodiscard]] DomId self() const { return self_; }
  /// Grants whose revoke is waiting for the peer to let go.
  [[nodiscard]] std::size_t deferred_count() const;
  /// Retries the deferred revokes now; returns how many are still deferred.
  std::size_t retry_deferred();
  [[nodiscard]] std::size_t free_frame_count() const;

 private:
  class Pages;
  struct Grant {
    std::uint32_t ref;
    std::uint32_t frame;
  };

  /// Revokes `grants` (called by Pages' destructor); those still in use are deferred.
  void release(const std::vector<Grant>& grants);
  /// Ends foreign access to `ref`; false if the peer still has it mapped or in a copy.
  bool try_revoke(std::uint32_t ref);
  void retry_deferred_locked();

  DomId self_;
  MappedRegion memory_, grants_;
  std::uint32_t nr_frames_, nr_entries_;
  mutable std::mutex mu_;
  std::vector<std::uint32_t> free_frames_;
  std::vector<std::uint32_t> free_refs_;
  std::vector<Grant> deferred_;
};

}  // namespace unetback::hv::sim
