// Moves the whole test process into a network namespace of its own (root only), once: the
// TAPs, bridges and addresses a root-netns test makes never touch the machine's network and
// vanish with the process.
#pragma once

#include <cstdlib>
#include <sched.h>
#include <unistd.h>

namespace unetback::test {

/// True once the process runs in its own namespace (lo up, IPv6 off); false when it cannot
/// (not root, no /dev/net/tun): the caller then skips.
inline bool enter_private_netns() {
  static const bool entered = [] {
    if (::geteuid() != 0 || ::access("/dev/net/tun", R_OK | W_OK) != 0) return false;
    if (::unshare(CLONE_NEWNET) != 0) return false;
    (void)std::system("ip link set lo up");
    // No IPv6: a TAP coming up would otherwise send its own neighbour-discovery frames,
    // mixed with the test's traffic.
    (void)std::system(
        "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
        "net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1");
    return true;
  }();
  return entered;
}

}  // namespace unetback::test
