// The xenbus device states (xen/include/public/io/xenbus.h) and their strict parse from the
// decimal string each end writes to its `state` node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace unetback::xenbus {

enum class XenbusState : std::uint8_t {
  unknown = 0,
  initialising = 1,
  init_wait = 2,  // finished early init, waiting for the peer or the hotplug script
  initialised = 3,
  connected = 4,
  closing = 5,  // closing because of an error or an unplug
  closed = 6,
  reconfiguring = 7,
  reconfigured = 8,
};

inline constexpr std::uint8_t kXenbusStateCount = 9;

/// "4" -> connected. Only a plain decimal 0..8 is accepted (no sign, no spaces, no junk):
/// anything else is nullopt, which the adapter treats as a hostile or broken writer.
[[nodiscard]] std::optional<XenbusState> parse_xenbus_state(std::string_view s);

/// The value written to xenstore: "0".."8".
[[nodiscard]] std::string to_xs_string(XenbusState s);

/// The name Linux prints ("InitWait", "Connected", ...), for logs.
[[nodiscard]] std::string_view state_name(XenbusState s);

}  // namespace unetback::xenbus
