// One `--vif` option of unetback-xl, in xl's vif-spec syntax ("mac=…,bridge=…,script=…"),
// turned into the toolstack::VifSpec libxl would write. Keys we do not implement are refused
// rather than ignored, so a config never silently means less than it says.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "tools/xl/toolstack.hpp"

namespace unetback::toolstack {

struct VifOptionError {
  std::string message;
};

/// Parses "key=value,key=value…". Keys: mac, bridge, script, rate (xl syntax, or libxl's raw
/// "<bytes>,<usecs>" whose comma may stay in the list), vifname, mtu (68..65535), ip (the
/// guest's addresses, space-separated, for vif-route), gatewaydev (an interface name), devid
/// (0..255; default `default_devid`), trusted (0/1), backend (the serving domain's name or
/// domid: a driver domain; resolved by the caller). The script defaults to libxl's
/// /etc/xen/scripts/vif-bridge.
[[nodiscard]] std::variant<VifSpec, VifOptionError> parse_vif_option(std::string_view text,
                                                                     DevId default_devid);

}  // namespace unetback::toolstack
