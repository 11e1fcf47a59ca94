// A vif's name in the control protocol and in the backend tree: `<domid>/<devid>`.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include "common/util/strong_id.hpp"

namespace unetback::control {

/// `<domid>/<devid>`, the key of a vif in the backend tree.
struct VifId {
  DomId domid{};
  DevId devid{};
  friend auto operator<=>(const VifId&, const VifId&) = default;
};
/// "5/0" -> {5, 0}: strict decimal on both sides (a domain's id, not a reserved one), nothing
/// else.
[[nodiscard]] std::optional<VifId> parse_vif_id(std::string_view s);
[[nodiscard]] std::string format_vif_id(const VifId& id);

}  // namespace unetback::control
