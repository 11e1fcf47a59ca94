// `unetback-xl devd`: `xl devd` inside a driver domain. On that domain's own xenstore
// connection it watches the vifs the domain serves (/local/domain/<self>/backend/vif) and runs
// their hotplug scripts there, as libxl's device events handler does: `online` once the
// backend is in InitWait with online=1 and no hotplug-status yet, `offline` once the vif is
// Closed with online=0 (or its dir is gone), after which it removes the backend dir, which
// only the backend's domain may do. It exits on SIGTERM or SIGINT, or with its domain.
#pragma once

#include <string>

namespace unetback::xl {

/// Serves the driver domain `target` of the world in `dir` until stopped.
int cmd_devd(const std::string& dir, const std::string& target);

}  // namespace unetback::xl
