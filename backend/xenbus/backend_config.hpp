// The toolstack's keys in the backend directory (libxl's vif contract: what it writes), read
// and validated at probe. The toolstack is more trusted than a frontend, but `frontend` decides
// which directory we watch and read as "the frontend": it must be exactly that vif's frontend
// directory in the domain our own path names, or a domain could steer us at another's keys.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backend/xenbus/keys.hpp"
#include "common/net/frame.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::xenbus {

/// `/local/domain/<self>/backend/vif/<domid>/<devid>`.
[[nodiscard]] std::string backend_dir_path(DomId self, DomId frontend, DevId devid);
/// `/local/domain/<domid>/device/vif/<devid>`: the only frontend path we accept.
[[nodiscard]] std::string frontend_dir_path(DomId frontend, DevId devid);
/// `/local/domain/<self>/error/backend/vif/<domid>/<devid>/error`: where xenbus_dev_fatal puts
/// its message (it writes "error/<nodename>" relative to the domain's home, key "error").
[[nodiscard]] std::string error_node_path(DomId self, DomId frontend, DevId devid);

/// The netif rate limit: `bytes` per `usecs`. Absent = unlimited.
struct Rate {
  std::uint64_t bytes = ~std::uint64_t{0};
  std::uint64_t usecs = 0;
  [[nodiscard]] bool unlimited() const { return bytes == ~std::uint64_t{0} && usecs == 0; }
  friend bool operator==(const Rate&, const Rate&) = default;
};

/// "<bytes>,<usecs>": decimal, comma, decimal, end (Linux xen_net_read_rate). nullopt otherwise.
[[nodiscard]] std::optional<Rate> parse_rate(std::string_view s);

/// Reads B:`rate`: absent -> unlimited; malformed or 0 bytes per interval -> the error (the
/// caller logs it and goes unlimited, as Linux's xen_net_read_rate does for a value it cannot
/// parse).
[[nodiscard]] Result<Rate, KeyError> read_rate(const KeyReader& read);

// MAC addresses (`mac`) and interface names (`vifname`) are validated with common/net's
// net::parse_mac and net::valid_ifname: the same rules the TAP is created with.

/// The B:bridge prefix that names an internal switch instead of a Linux bridge.
inline constexpr std::string_view kSwitchPrefix = "unetback:";
/// An internal switch name: 1..32 of [A-Za-z0-9_.-].
[[nodiscard]] bool valid_switch_name(std::string_view name);

/// B:unetback-allow-mac-spoofing = "1": the guest of a vif on an internal switch may send
/// frames with any source MAC (a guest that bridges other machines, or moves a MAC between
/// vifs). Absent or "0": its TX must carry its own B:mac as source, or it is dropped and the
/// switch learns nothing from it. Watched while connected; a plain TAP ignores it (there the
/// host's bridge and its filters decide, as with netback).
inline constexpr std::string_view kAllowMacSpoofingKey = "unetback-allow-mac-spoofing";

inline constexpr std::uint32_t kMinMtu = 68;
inline constexpr std::uint32_t kMaxMtu = 65535;

struct BackendConfig {
  DomId frontend_id{};
  DevId devid{};
  std::string frontend_path;  // validated: frontend_dir_path(frontend_id, devid)
  /// The TAP's name at creation: always vif<domid>.<devid> (libxl's $vif); the hotplug script
  /// may rename it to `vifname` afterwards.
  std::string tap_name;
  std::optional<std::string> vifname;  // B:vifname (validated; the script's business)
  /// The backend directory (set by the xenbus adapter): the TAP's ifalias names it, so a
  /// hotplug script can tell the TAP unetbackd made for this vif from any other device.
  std::string backend_path;
  std::optional<net::MacAddress> mac;  // the guest's MAC (bookkeeping only)
  std::optional<std::uint32_t> mtu;    // kMinMtu..kMaxMtu
  /// B:bridge "unetback:<name>": the vif joins unetbackd's internal switch <name> (the hotplug
  /// script then touches no Linux bridge). Empty: the vif is a plain TAP (a Linux bridge, if
  /// any, is the hotplug script's business).
  std::string switch_name;
  bool allow_mac_spoofing = false;  // B:unetback-allow-mac-spoofing
  friend bool operator==(const BackendConfig&, const BackendConfig&) = default;
};

/// Validates the toolstack's keys of the backend directory of vif `devid` of domain `frontend`
/// (both taken from the directory's own path): `frontend-id` must be that domain, `frontend`
/// that domain's device/vif/<devid>, `handle` (if present) the devid; `vifname`, `mac`, `mtu`
/// and kAllowMacSpoofingKey are optional but must be well-formed when present.
[[nodiscard]] Result<BackendConfig, KeyError> parse_backend_config(const KeyReader& read,
                                                                   DomId frontend, DevId devid);

}  // namespace unetback::xenbus
