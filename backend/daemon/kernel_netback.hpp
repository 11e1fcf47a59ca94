// The kernel netback check: with xen_netback loaded, the kernel and unetbackd would both
// answer every backend/vif node libxl writes (udev loads the module on the node's
// xen-backend:vif alias unless modprobe.d/unetback.conf blacklists it), so on real Xen
// unetbackd refuses to start unless the operator says otherwise (--allow-kernel-netback).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/hv/hypervisor_spec.hpp"

namespace unetback::daemon {

/// Where sysfs is: $UNETBACK_SYSFS_ROOT if set and not empty (tests), else "/sys".
[[nodiscard]] std::string sysfs_root();

/// True if `<sysfs>/module/xen_netback` exists: the module is loaded, or built in (=y).
[[nodiscard]] bool kernel_netback_loaded(std::string_view sysfs);

/// The reason to refuse starting, or nothing: only for `--hypervisor xen` (xensim worlds
/// never meet the kernel netback), and not with --allow-kernel-netback.
[[nodiscard]] std::optional<std::string> kernel_netback_conflict(
    const hv::HypervisorSpec& hypervisor, bool allowed, std::string_view sysfs);

}  // namespace unetback::daemon
