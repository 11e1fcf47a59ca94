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

/// What XEN_DOMCTL_getdomaininfo says of a domain, as far as its backends care.
struct DomainRunState {
  bool dying = false;
  bool shutdown = false;
  unsigned shutdown_reason = 0;  // SHUTDOWN_* (xen/sched.h), when `shutdown`
};
/// Whether a domain in `s` may still use its devices: not dying, and not shut down unless it
/// suspended. A suspend is a shutdown (and xenstored fires @releaseDomain for it), but a
/// checkpoint (`xl save -c`), a migration that failed, or Remus/COLO resume the guest with
/// the same frontends, connected: tearing its vifs down would leave it without a network.
[[nodiscard]] bool may_use_devices(const DomainRunState& s);

class XenDomainInfo {
 public:
  /// Opens nothing yet: privcmd is opened on the first query.
  XenDomainInfo();
  ~XenDomainInfo();
  XenDomainInfo(const XenDomainInfo&) = delete;
  XenDomainInfo& operator=(const XenDomainInfo&) = delete;

  /// true if `domid` exists and may_use_devices(), false if it does not (or is on its way
  /// out), nullopt if the hypervisor cannot be asked (no /dev/xen/privcmd, or no
  /// privilege for the domctl, as in a driver domain). Thread-safe.
  [[nodiscard]] std::optional<bool> exists(DomId domid);
  /// Closes privcmd for good: exists() answers nullopt from now on.
  void close();

 private:
  struct Closer {
    void operator()(xc_interface_core* xc) const noexcept;
  };
  std::mutex mutex_;
  std::unique_ptr<xc_interface_core, Closer> xc_;
  bool open_failed_ = false;
};

}  // namespace unetback::hv
