// The guest's side of the host: entering a named network namespace (as `ip netns exec`
// does) and configuring the shim's TAP there (MAC, MTU, up, an address).
#pragma once

#include <string>
#include <system_error>

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

}  // namespace unetback::shim
