// The guest's side of the host: entering a named network namespace (as `ip netns exec`
// does) and configuring the shim's TAP there (MAC, MTU, up, an address).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "common/net/tap_device.hpp"
#include "common/util/result.hpp"

namespace unetback::shim {

/// Moves the calling thread into /run/netns/<name> (setns CLONE_NEWNET). Call it before any
/// other thread exists: only the calling thread moves. Filesystem sockets (xensim, xenstored)
/// keep working; TAPs and netlink sockets created afterwards live in the namespace.
[[nodiscard]] std::error_code enter_netns(const std::string& name);

/// Creates the TAP with `config`, brings it up and adds `address` (CIDR) if not empty.
/// Errors name the step that failed in `what`.
[[nodiscard]] Result<net::TapDevice> create_guest_tap(const net::TapConfig& config,
                                                      const std::string& address,
                                                      std::string& what);

/// Runs `ip addr add <cidr> dev <ifname>` (fork/exec, no shell) and waits for it.
[[nodiscard]] std::error_code add_address(const std::string& ifname, const std::string& cidr);

/// The first IPv4 address of `ifname` in the calling thread's namespace (SIOCGIFADDR), or
/// nothing.
[[nodiscard]] std::optional<std::array<std::uint8_t, 4>> ipv4_address(const std::string& ifname);

/// What Linux sends when a netdev notifies its peers (arp_netdev_event, NETDEV_NOTIFY_PEERS):
/// a broadcast ARP request for our own address from our own address and MAC (a gratuitous
/// ARP), padded to the 60-byte Ethernet minimum.
[[nodiscard]] std::vector<std::byte> gratuitous_arp(const std::array<std::uint8_t, 6>& mac,
                                                    const std::array<std::uint8_t, 4>& ip);

}  // namespace unetback::shim
