// The --hypervisor value of every program, parsed in one place: "xen" (the real hypervisor
// through libxen*) or "sim:<world-dir>" (the xensim world running in that directory).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace unetback::hv {

struct XenSpec {
  bool operator==(const XenSpec&) const = default;
};
struct SimSpec {
  // Explicit: a string is a spec only through parse_hypervisor_spec().
  explicit SimSpec(std::string dir) : world_dir(std::move(dir)) {}
  std::string world_dir;  ///< not empty
  bool operator==(const SimSpec&) const = default;
};
using HypervisorSpec = std::variant<XenSpec, SimSpec>;

/// "xen" or "sim:<dir>" with a non-empty dir; nothing for anything else.
[[nodiscard]] std::optional<HypervisorSpec> parse_hypervisor_spec(std::string_view text);

inline constexpr std::string_view kSimSpecPrefix = "sim:";

/// The inverse of parse_hypervisor_spec() for a xensim world: "sim:<dir>" (what a program
/// that starts another one passes as its --hypervisor). An empty dir gives "sim:", which
/// the parser refuses. Inline: test fixtures that link nothing of ours use it too.
[[nodiscard]] inline std::string format_sim_spec(std::string_view world_dir) {
  std::string spec(kSimSpecPrefix);
  spec += world_dir;
  return spec;
}

/// The xensim world's directory, or nullptr for real Xen.
[[nodiscard]] inline const std::string* sim_world_dir(const HypervisorSpec& spec) {
  const auto* sim = std::get_if<SimSpec>(&spec);
  return sim != nullptr ? &sim->world_dir : nullptr;
}

}  // namespace unetback::hv
