#include "common/control/protocol.hpp"

namespace unetback::control {

std::string default_control_path(const hv::HypervisorSpec& hypervisor) {
  if (const auto* dir = hv::sim_world_dir(hypervisor)) return *dir + "/unetbackd.sock";
  return "/run/unetback/unetbackd.sock";
}

}  // namespace unetback::control
