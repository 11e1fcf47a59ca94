#include "common/xenbus/xenbus_state.hpp"

#include "common/hv/xenstore.hpp"

namespace unetback::xenbus {

std::optional<XenbusState> parse_xenbus_state(std::string_view s) {
  auto v = hv::parse_xs_uint<std::uint32_t>(s);
  if (!v || *v >= kXenbusStateCount) return std::nullopt;
  return static_cast<XenbusState>(*v);
}

std::string to_xs_string(XenbusState s) {
  return std::to_string(static_cast<unsigned>(s));
}

std::string_view state_name(XenbusState s) {
  switch (s) {
    case XenbusState::unknown: return "Unknown";
    case XenbusState::initialising: return "Initialising";
    case XenbusState::init_wait: return "InitWait";
    case XenbusState::initialised: return "Initialised";
    case XenbusState::connected: return "Connected";
    case XenbusState::closing: return "Closing";
    case XenbusState::closed: return "Closed";
    case XenbusState::reconfiguring: return "Reconfiguring";
    case XenbusState::reconfigured: return "Reconfigured";
  }
  return "Invalid";
}

}  // namespace unetback::xenbus
