// XenDomainInfo: whether a domain exists, asked of the hypervisor through libxenctrl
// (XEN_DOMCTL_getdomaininfo). The only user of xenctrl.h, kept apart because that header
// is toolstack-private (__XEN_TOOLS__) and heavy.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "common/util/strong_id.hpp"

struct xc_interface_core;

namespace unetback::hv {

class XenDomainInfo {
 public:
  /// Opens nothing yet: privcmd is opened on the first query.
  XenDomainInfo();
  ~XenDomainInfo();
  XenDomainInfo(const XenDomainInfo&) = delete;
  XenDomainInfo& operator=(const XenDomainInfo&) = delete;

  /// true if `domid` exists and is neither dying nor shut down, false if it does not (or is
  /// on its way out), nullopt if the hypervisor cannot be asked (no /dev/xen/privcmd, or no
  /// privilege for the domctl, as in a driver domain). Thread-safe.
  [[nodiscard]] std::optional<bool> exists(DomId domid);

 private:
  struct Closer {
    void operator()(xc_interface_core* xc) const noexcept;
  };
  std::mutex mutex_;
  std::unique_ptr<xc_interface_core, Closer> xc_;
  bool open_failed_ = false;
};

}  // namespace unetback::hv
