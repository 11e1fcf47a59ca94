#include "common/hv/xen/xen_grant_table.hpp"

#include <cerrno>
#include <string>
#include <sys/mman.h>
#include <vector>

#include "common/hv/xen/xen_open_error.hpp"
#include "common/hv/xen/xen_tool_logger.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

constexpr const char* kGnttabLog = "xen-gnttab";

// A bad guest grant fails only its own segment (a per-segment status); a whole call fails
// on a gntdev error or a backend bug. Rate-limited all the same, so that a persistent fault
// on the data path cannot flood dom0's log.
// NOLINTNEXTLINE(cert-err58-cpp): RateLimit only stores numbers and reads the clock.
log::RateLimit g_copy_fail_rate;

}  // namespace

void XenGrantTable::Closer::operator()(xengnttab_handle* h) const noexcept {
  (void)xengnttab_close(h);
}

XenGrantTable::XenGrantTable(std::size_t max_segments_per_call,
                             std::optional<std::uint32_t> max_grants)
    : BatchingGrantTable(max_segments_per_call), batch_(max_segments_per_call) {
  handle_.reset(xengnttab_open(xen_tool_logger(), 0));
  if (!handle_) {
    const int err = errno;
    throw SetupError(xen_open_error("grant table", "/dev/xen/gntdev", err), errno_code(err));
  }
  // gntdev wants the limit set before the first mapping of the handle.
  if (max_grants && xengnttab_set_max_grants(handle_.get(), *max_grants) != 0) {
    throw SetupError("grant table: cannot set the limit of mapped grants to " +
                     std::to_string(*max_grants) + ": " + last_errno().message());
  }
}

XenGrantTable::~XenGrantTable() = default;

bool XenGrantTable::copy_call(std::span<GrantCopySegment> segments) noexcept {
  prepare_copy_batch(segments, batch_);
  if (batch_.segs.empty()) return true;
  if (xengnttab_grant_copy(handle_.get(), static_cast<std::uint32_t>(batch_.segs.size()),
                           batch_.segs.data()) != 0) {
    const int err = errno;
    log::write_limited(g_copy_fail_rate, log::Level::warn, kGnttabLog,
                       "grant copy of " + std::to_string(batch_.segs.size()) +
                           " segments failed as a whole: " + errno_code(err).message());
    return false;
  }
  apply_copy_statuses(batch_, segments);
  return true;
}

Result<MappedGrants> XenGrantTable::map(DomId granter, std::span<const GrantRef> refs,
                                        Access access) {
  if (refs.empty()) return std::errc::invalid_argument;
  std::vector<std::uint32_t> raw(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) raw[i] = refs[i].value();
  const int prot = access == Access::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  // libxengnttab maps all refs or none (on partial failure it undoes what it mapped).
  void* addr = xengnttab_map_domain_grant_refs(
      handle_.get(), static_cast<std::uint32_t>(raw.size()), granter.value(), raw.data(), prot);
  if (addr == nullptr) return errno != 0 ? last_errno() : errno_code(EIO);
  return MappedGrants(this, static_cast<std::byte*>(addr), refs.size(), access);
}

void XenGrantTable::unmap(std::byte* addr, std::size_t count) noexcept {
  if (xengnttab_unmap(handle_.get(), addr, static_cast<std::uint32_t>(count)) != 0) {
    // Nothing to recover: the pages stay mapped (and the grants held) until we exit.
    log::write(log::Level::error, kGnttabLog,
               "unmap of " + std::to_string(count) + " grants failed: " + last_errno().message());
  }
}

}  // namespace unetback::hv
