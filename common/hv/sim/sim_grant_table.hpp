// SimGrantTable: xensim's GrantTable, run in the mapping process (the backend, dom0).
//
// The backend is the hypervisor here: it maps each granting domain's memory and grant table
// once (GET_DOMAIN_MEMORY, cached until the domain's control page says it is dead) and does
// what Xen's grant_table.c does for GNTTABOP_copy and GNTTABOP_map_grant_ref:
//
// * every segment is checked: domain known and alive (else GNTST_bad_domain), foreign
//   offset+len <= 4096 (GNTST_bad_copy_arg), gref < the table size and the entry's type
//   GTF_permit_access (GNTST_bad_gntref), entry domid == our domid and no write to a
//   GTF_readonly grant (GNTST_permission_denied), frame inside the granter's memory
//   (GNTST_bad_page);
// * the check and the setting of GTF_reading (and GTF_writing for a write) are one 32-bit
//   compare-and-swap on the entry's {flags, domid} word, so a granter that revokes
//   concurrently either wins (we fail the segment) or finds the bits set and must defer;
// * the bits stay set while a copy is running or a mapping exists, counted per entry in
//   this process (pins), and are cleared when the last user goes.
//
// The counts live in a pin table the broker gave with the domain's memory: when this process
// dies, the broker clears the bits it still held (gntdev does the same at process exit on Xen),
// so a successor backend and the granter are not left with grants pinned forever.
//
// Limitation: the pins are per process. Two processes mapping the same grant share the
// bits without sharing the count, so the first to let go clears them. Real Xen keeps the
// count in the hypervisor; xensim's mappers are normally one backend per domain.
//
// copy() is not reentrant (as BatchingGrantTable's counters); map() and unmap() may run on
// other threads concurrently with it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/hv/grant_table.hpp"
#include "common/hv/sim/broker_client.hpp"
#include "common/hv/sim/broker_protocol.hpp"
#include "common/hv/sim/mapped_region.hpp"
#include "common/hv/sim/shared_grant_entry.hpp"

namespace unetback::hv::sim {

class SimGrantTable final : public BatchingGrantTable {
 public:
  SimGrantTable(BrokerClient& broker, DomId self, std::size_t max_segments_per_call);
  /// Unmaps whatever is still mapped (MappedGrants should not outlive the table).
  ~SimGrantTable() override;
  SimGrantTable(const SimGrantTable&) = delete;
  SimGrantTable& operator=(const SimGrantTable&) = delete;

  /// Maps each ref's frame at its place in one contiguous region (PROT_READ for
  /// read_only), all or nothing. Errors: ESRCH unknown or dead domain, EINVAL bad gref or
  /// not a permit_access grant or empty refs, EPERM granted to another domain or read-only
  /// for a read_write map, EFAULT frame outside the granter's memory, ENOMEM.
  Result<MappedGrants> map(DomId granter, std::span<const GrantRef> refs, Access access) override;
  void unmap(std::byte* addr, std::size_t count) noexcept override;

 protected:
  bool copy_call(std::span<GrantCopySegment> segments) noexcept override;

 private:
  struct DomainView;
  struct MapRecord;
  struct Resolved;

  /// The cached view of `domid`, (re)fetched from the broker. ESRCH when the domain is
  /// unknown or dead; else the real cause (EMFILE: no room here for its memory's fds, ENOMEM:
  /// no address space to map it), so the log says what ran out. Called with mu_ held.
  Result<std::shared_ptr<DomainView>> view_for(DomId domid);
  /// Validates grant `ref` for one access and pins it; GNTST_okay and the frame, or the
  /// failing status. Called with mu_ held.
  std::int16_t pin(DomainView& v, GrantRef ref, bool write, std::uint32_t& frame);
  void unpin(DomainView& v, GrantRef ref, bool write);
  std::int16_t resolve_side(const GrantCopyPtr& side, std::uint16_t len, bool write, Resolved& r,
                            std::byte*& addr);

  BrokerClient& broker_;
  DomId self_;
  std::mutex mu_;
  std::unordered_map<std::uint16_t, std::shared_ptr<DomainView>> views_;
  // Domains seen dead: xensim never reuses a domid, so they stay dead without asking.
  std::unordered_set<std::uint16_t> dead_;
  /// Keyed by the record's own address: the key a MappedGrants gives back to unmap().
  std::unordered_map<std::byte*, std::unique_ptr<MapRecord>> maps_;
  std::vector<Resolved> scratch_;
};

}  // namespace unetback::hv::sim
