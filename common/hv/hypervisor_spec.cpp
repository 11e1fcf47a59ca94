#include "common/hv/hypervisor_spec.hpp"

namespace unetback::hv {

std::optional<HypervisorSpec> parse_hypervisor_spec(std::string_view text) {
  if (text == "xen") return XenSpec{};
  if (text.starts_with(kSimSpecPrefix) && text.size() > kSimSpecPrefix.size())
    return SimSpec{std::string(text.substr(kSimSpecPrefix.size()))};
  return std::nullopt;
}

}  // namespace unetback::hv
