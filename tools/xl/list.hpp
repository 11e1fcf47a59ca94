// `unetback-xl list`: the world's domains with their vifs (devid, backend state,
// hotplug-status, bridge, TAP) and guest pids, one row a vif.
#pragma once

#include "tools/xl/world.hpp"

namespace unetback::xl {

int cmd_list(World& w);

}  // namespace unetback::xl
