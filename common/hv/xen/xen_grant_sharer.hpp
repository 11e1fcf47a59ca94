// XenGrantSharer: GrantSharer over libxengntshr (/dev/xen/gntalloc), for a frontend in a
// guest: the kernel allocates zeroed pages, grants each one to the peer and maps them here.
#pragma once

#include <cstddef>
#include <memory>

#include "common/hv/grant_sharer.hpp"

struct xengntdev_handle;

namespace unetback::hv {

class XenGrantSharer final : public GrantSharer {
 public:
  /// Opens /dev/xen/gntalloc; throws SetupError naming it when that fails.
  XenGrantSharer();
  /// Closes the handle. Every SharedPages must have been released before.
  ~XenGrantSharer() override;
  XenGrantSharer(const XenGrantSharer&) = delete;
  XenGrantSharer& operator=(const XenGrantSharer&) = delete;

  /// The returned pages unshare on destruction (xengntshr_unshare). If the peer still maps
  /// a page then, gntalloc keeps the page and ends the grant only once the peer has let it
  /// go (gnttab_end_foreign_access deferral in the kernel), so no page a peer can still
  /// write is ever reused.
  Result<SharedPages> share(DomId peer, std::size_t count, Access access) override;

  /// Always GrantUse::unknown: libxengntshr does not expose the grant entries' GTF_reading /
  /// GTF_writing bits, and it does not need to, because gntalloc defers the free itself.
  [[nodiscard]] GrantUse in_use(GrantRef ref) const override;

 private:
  struct Closer {
    void operator()(xengntdev_handle* h) const noexcept;
  };
  std::unique_ptr<xengntdev_handle, Closer> handle_;
};

}  // namespace unetback::hv
