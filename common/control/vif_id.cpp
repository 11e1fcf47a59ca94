#include "common/control/vif_id.hpp"

#include <cstdint>

#include "common/hv/xenstore.hpp"

namespace unetback::control {

std::optional<VifId> parse_vif_id(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto d = hv::parse_domid(s.substr(0, slash));
  const auto v = hv::parse_xs_uint<std::uint32_t>(s.substr(slash + 1));
  if (!d || !v) return std::nullopt;
  return VifId{*d, DevId{*v}};
}

std::string format_vif_id(const VifId& id) {
  return std::to_string(id.domid.value()) + "/" + std::to_string(id.devid.value());
}

}  // namespace unetback::control
