#include <string>

#include "common/hv/hypervisor.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/hv/xen/xen_hypervisor.hpp"

namespace unetback::hv {

std::unique_ptr<Hypervisor> open_hypervisor(const HypervisorSpec& spec,
                                            const HypervisorOptions& opts) {
  if (const auto* dir = sim_world_dir(spec)) return open_sim_hypervisor(*dir, opts);
  return open_xen_hypervisor(opts);
}

std::unique_ptr<Hypervisor> open_hypervisor(std::string_view spec, const HypervisorOptions& opts) {
  const auto parsed = parse_hypervisor_spec(spec);
  if (!parsed) {
    throw SetupError("unknown hypervisor '" + std::string(spec) +
                     "': use --hypervisor xen (real Xen) or --hypervisor sim:<world-dir> (xensim)");
  }
  return open_hypervisor(*parsed, opts);
}

}  // namespace unetback::hv
