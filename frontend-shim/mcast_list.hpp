// The guest's multicast list, as win-xenvif hands it to the backend (--mode xenvif): the
// groups the guest kernel joined on its TAP (/proc/net/dev_mcast of the guest's namespace)
// become MCAST_ADD extras, the groups it left MCAST_DEL extras (netif.h "Multicast control").
// Pure: the caller reads the file and sends the extras.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace unetback::shim {

using McastAddr = std::array<std::uint8_t, 6>;

/// The link-layer groups of interface `ifname` in /proc/net/dev_mcast's text ("ifindex name
/// users global hex-address" per line), sorted, without duplicates. Lines of other
/// interfaces, malformed lines and addresses that are not multicast are skipped.
[[nodiscard]] std::vector<McastAddr> parse_dev_mcast(std::string_view text,
                                                     std::string_view ifname);

/// What to tell the backend to go from `known` to `wanted` (both sorted and unique).
struct McastDelta {
  std::vector<McastAddr> add, remove;
};
[[nodiscard]] McastDelta mcast_delta(const std::vector<McastAddr>& known,
                                     const std::vector<McastAddr>& wanted);

}  // namespace unetback::shim
