// One `--vif` option of unetback-xl, in xl's vif-spec syntax ("mac=…,bridge=…,script=…"),
// turned into the toolstack::VifSpec libxl would write. Keys we do not implement are refused
// rather than ignored, so a config never silently means less than it says.
#pragma once

#include <optional>
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

/// Why `create` refuses this vif (the value's key named, as parse_vif_option words it), or
/// nullopt. The one check of a vif's values: parse_vif_option's, and restore's for each vif of
/// a save image, and save's and migrate's for each vif read back before the guest is suspended.
/// mac, script (not empty), rate (libxl's or xl's form, not rounding to zero), vifname and
/// gatewaydev (interface names), mtu (68..65535), ip (not empty), devid (0..255).
[[nodiscard]] std::optional<std::string> vif_spec_error(const VifSpec& spec);

}  // namespace unetback::toolstack
