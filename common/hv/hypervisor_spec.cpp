#include "common/hv/hypervisor_spec.hpp"

namespace unetback::hv {

namespace {
constexpr std::string_view kSimPrefix = "sim:";
}  // namespace

std::optional<HypervisorSpec> parse_hypervisor_spec(std::string_view text) {
  if (text == "xen") return XenSpec{};
  if (text.starts_with(kSimPrefix) && text.size() > kSimPrefix.size())
    return SimSpec{std::string(text.substr(kSimPrefix.size()))};
  return std::nullopt;
}

}  // namespace unetback::hv
