// open_xen_hypervisor: the Hypervisor bundle over the real Xen libraries (open_hypervisor's
// "xen" choice).
#pragma once

#include <memory>

#include "common/hv/hypervisor.hpp"

namespace unetback::hv {

/// Opens what `opts.role` needs, at once, so a missing device fails at startup:
/// a backend opens /dev/xen/gntdev (grant_table()), a frontend /dev/xen/gntalloc
/// (grant_sharer()); event channels and xenstore connections are opened per call of
/// open_event_channel() / open_xenstore(). self() is read from xenstore ("domid", relative
/// to our own /local/domain/<id>); a backend that cannot read it assumes dom0 and logs a
/// warning, a frontend fails. opts.domid and opts.name only apply to xensim and are ignored.
/// Throws SetupError naming the missing device, with a pointer to sim:<world-dir>.
std::unique_ptr<Hypervisor> open_xen_hypervisor(const HypervisorOptions& opts);

}  // namespace unetback::hv
