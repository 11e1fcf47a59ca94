#include "common/hv/xen/xen_domain_info.hpp"

#include <cerrno>
#include <cstdint>
#include <string>

extern "C" {
#include <xenctrl.h>
}

#include "common/hv/xen/xen_tool_logger.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {

void XenDomainInfo::Closer::operator()(xc_interface_core* xc) const noexcept {
  (void)xc_interface_close(xc);
}

XenDomainInfo::XenDomainInfo() = default;
XenDomainInfo::~XenDomainInfo() = default;

void XenDomainInfo::close() {
  const std::lock_guard lock(mutex_);
  xc_.reset();
  open_failed_ = true;
}

std::optional<bool> XenDomainInfo::exists(DomId domid) {
  const std::lock_guard lock(mutex_);
  if (!xc_ && !open_failed_) {
    xc_.reset(xc_interface_open(xen_tool_logger(), xen_tool_logger(), 0));
    if (!xc_) {
      // Remembered, so a host without privcmd is not asked again on every query.
      open_failed_ = true;
      log::write(log::Level::warn, "xen",
                 "cannot open /dev/xen/privcmd (" + last_errno().message() +
                     "): cannot ask the hypervisor which domains exist");
    }
  }
  if (!xc_) return std::nullopt;
  // xc_domain_getinfo (Xen 4.17; _single only exists from 4.18) reports the first domain
  // at or after `domid`, so a gap in the domid space shows up as a different domid.
  xc_dominfo_t info{};
  const int n = xc_domain_getinfo(xc_.get(), domid.value(), 1, &info);
  if (n < 0) return std::nullopt;
  if (n == 0 || info.domid != domid.value()) return false;
  return may_use_devices({info.dying != 0, info.shutdown != 0, info.shutdown_reason});
}

bool may_use_devices(const DomainRunState& s) {
  // A dying domain is being torn down; one shut down for any reason but a suspend has stopped
  // running and only waits for its toolstack to destroy it. Neither will ever talk to its
  // backend again. A suspended one may be resumed where it stopped.
  return !s.dying && (!s.shutdown || s.shutdown_reason == SHUTDOWN_suspend);
}

}  // namespace unetback::hv
