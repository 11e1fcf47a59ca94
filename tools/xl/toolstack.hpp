// libxl's vif contract, for the xensim world (and for tests): the xenstore nodes libxl writes
// for `vif = ['mac=…,bridge=…']`, the waits with libxl's timeouts, and the removal sequence.
// Facts: libxl 4.17's libxl_nic.c and libxl_device.c, as the real-Xen lab observed them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "common/hv/xenstore.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::toolstack {

/// LIBXL_INIT_TIMEOUT: how long libxl waits for the backend's InitWait (also its
/// LIBXL_DESTROY_TIMEOUT for Closed).
inline constexpr std::chrono::seconds kInitTimeout{10};
inline constexpr std::chrono::seconds kDestroyTimeout{10};
/// (LIBXL_HOTPLUG_TIMEOUT is hotplug::kHotplugTimeout, common/hotplug/hotplug_script.hpp.)

struct VifSpec {
  DevId devid{0};
  /// xl's backend=: the domain serving the vif, a name or a domid as written ("": dom0), and
  /// the domid it named when the device was added (libxl's backend_domid).
  std::string backend;
  DomId backend_id{0};
  std::string mac = "00:16:3e:00:00:01";
  std::string bridge;
  std::string script = "/etc/xen/scripts/vif-bridge";
  std::optional<std::string> vifname;
  /// B:ip: the guest's addresses (space-separated) that vif-route routes to the vif.
  std::optional<std::string> ip;
  /// B:gatewaydev: the dom0 device vif-route takes its address from (the script's $netdev).
  std::optional<std::string> gatewaydev;
  /// B:rate as libxl writes it: "<bytes>,<usecs>" (only when an interval is set).
  std::optional<std::string> rate;
  std::optional<std::uint32_t> mtu;
  bool trusted = true;
};

[[nodiscard]] std::string backend_path(DomId backend, DomId frontend, DevId devid);

/// A random (version 4) UUID in libxl's text form, as libxl_uuid_generate gives a new domain.
[[nodiscard]] std::string generate_uuid();

/// libxl__domain_make's VM nodes, in one transaction: /vm/<uuid> (owned by dom0, readable by
/// the guest) with `uuid` and `name`, and /local/domain/<domid>/vm = /vm/<uuid>. Scripts such
/// as vif-openvswitch read the guest's name and uuid through them.
std::error_code add_vm_nodes(hv::XenStore& xs, DomId domid, const std::string& name,
                             const std::string& uuid);
/// libxl's domain destroy: removes the /vm/<uuid> directory /local/domain/<domid>/vm names.
void remove_vm_nodes(hv::XenStore& xs, DomId domid);
[[nodiscard]] std::string frontend_path(DomId frontend, DevId devid);

/// How long `save` waits for the guest to acknowledge control/shutdown=suspend, and then for
/// the suspended guest to let its domain go once its devices are removed.
inline constexpr std::chrono::seconds kSuspendAckTimeout{10};
inline constexpr std::chrono::seconds kSuspendReleaseTimeout{10};

/// libxl__domain_make's control/shutdown node: writable by the guest, which acknowledges a
/// request there (xen/manage.c writes "" back).
std::error_code add_control_nodes(hv::XenStore& xs, DomId domid);

/// A vif's configuration as `xl save` keeps it: libxl's private copy
/// (/libxl/<domid>/device/vif/<devid>) and the frontend's `trusted`. nullopt without the copy.
[[nodiscard]] std::optional<VifSpec> read_vif_spec(hv::XenStore& xs, DomId frontend, DevId devid);

/// libxl__device_generic_add + libxl__set_xenstore_nic: in one transaction (retried on
/// EAGAIN) the backend dir (perms n<backend>,r<frontend>), the frontend dir (perms
/// n<frontend>,r<backend>; `mtu` read-only to the guest) and libxl's private copy under
/// /libxl/<domid>/device/vif/<devid>.
std::error_code add_vif(hv::XenStore& xs, DomId backend, DomId frontend, const VifSpec& spec);

/// Waits (bounded) until `path` reads `value`, by watching it.
std::error_code wait_for_value(hv::XenStore& xs, const std::string& path, std::string_view value,
                               std::chrono::milliseconds timeout);

/// libxl__initiate_device_generic_remove: online=0 and state=5 in one transaction, wait up
/// to kDestroyTimeout for the backend's Closed (6), then delete the frontend dir, the
/// backend dir and the private copy (even after a timeout, as libxl does). Returns the
/// wait's error (timed_out) if the backend never closed.
std::error_code remove_vif(hv::XenStore& xs, DomId backend, DomId frontend, DevId devid);

/// remove_vif's two halves, for a caller that runs the hotplug script `offline` in between
/// as libxl does: close_vif writes online=0 + state=5 (unless already Closed) and waits up
/// to kDestroyTimeout for 6; delete_vif_nodes removes the frontend dir, the backend dir and
/// the private copy.
std::error_code close_vif(hv::XenStore& xs, DomId backend, DomId frontend, DevId devid);
void delete_vif_nodes(hv::XenStore& xs, DomId backend, DomId frontend, DevId devid);

}  // namespace unetback::toolstack
