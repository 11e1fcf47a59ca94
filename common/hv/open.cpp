#include <string>

#include "common/hv/hypervisor.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/hv/xen/xen_hypervisor.hpp"

namespace unetback::hv {

std::unique_ptr<Hypervisor> open_hypervisor(std::string_view spec, const HypervisorOptions& opts) {
  if (spec == "xen") return open_xen_hypervisor(opts);
  if (spec.starts_with("sim:") && spec.size() > 4)
    return open_sim_hypervisor(std::string(spec.substr(4)), opts);
  throw SetupError("unknown hypervisor '" + std::string(spec) +
                   "': use --hypervisor xen (real Xen) or --hypervisor sim:<world-dir> (xensim)");
}

}  // namespace unetback::hv
