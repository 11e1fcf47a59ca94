#include "backend/daemon/kernel_netback.hpp"

#include <cstdlib>
#include <sys/stat.h>
#include <variant>

namespace unetback::daemon {

std::string sysfs_root() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at startup, before any thread exists.
  const char* env = std::getenv("UNETBACK_SYSFS_ROOT");
  return env != nullptr && *env != '\0' ? env : "/sys";
}

bool kernel_netback_loaded(std::string_view sysfs) {
  const std::string path = std::string(sysfs) + "/module/xen_netback";
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::string> kernel_netback_conflict(const hv::HypervisorSpec& hypervisor,
                                                   bool allowed, std::string_view sysfs) {
  if (!std::holds_alternative<hv::XenSpec>(hypervisor) || allowed || !kernel_netback_loaded(sysfs))
    return std::nullopt;
  return "the kernel netback is loaded (" + std::string(sysfs) +
         "/module/xen_netback exists): it and unetbackd would race for every vif. Unload it "
         "(rmmod xen-netback) and keep it unloaded with /etc/modprobe.d/unetback.conf "
         "(blacklist xen-netback, install xen-netback /bin/false), or start unetbackd with "
         "--allow-kernel-netback if you know the kernel netback serves no vif of this domain";
}

}  // namespace unetback::daemon
