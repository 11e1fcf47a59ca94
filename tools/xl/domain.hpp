// libxl's domain build and teardown, the steps `create`, `destroy`, `save` and `restore`
// share: a domain made with its /vm and control nodes and its vifs added (nodes, InitWait, the
// hotplug script `online`, or a driver domain's devd running it there); and, the other way,
// each vif removed (Closed, the script `offline`, the nodes deleted), the guest stopped and
// the domain destroyed with its xenstore home.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "tools/xl/toolstack.hpp"
#include "tools/xl/world.hpp"

namespace unetback::xl {

/// libxl's domain build for `create` and `restore`: the domain, its /vm and control nodes
/// and each vif (nodes, InitWait, the hotplug script `online`). The domid, or the exit code
/// (the domain destroyed again).
std::variant<DomId, int> build_domain(World& w, const std::string& name, const std::string& uuid,
                                      const std::vector<toolstack::VifSpec>& vifs,
                                      bool driver_domain = false);

/// libxl's device removal for every vif of `domid`: close, script offline, delete nodes.
void remove_all_vifs(World& w, DomId domid);

/// The domain is gone: as libxl's domain destroy, remove its xenstore home too (xenstored
/// itself only forgets the connection).
void destroy_domain(World& w, DomId domid, bool report);

/// SIGTERMs the guest of `domid` (SIGKILL after 5 s) and removes its pid file.
void stop_guest(World& w, DomId domid);

/// Undo a failed create: devices, guest, domain (libxl destroys the domain).
void undo_create(World& w, DomId domid);

}  // namespace unetback::xl
