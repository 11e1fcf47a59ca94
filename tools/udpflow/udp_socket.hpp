// The sockets unetback-udpflow uses and the clock arithmetic of its loops.
#pragma once

#include <chrono>
#include <cstdint>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"
#include "tools/udpflow/udpflow_options.hpp"

namespace unetback::udpflow {

using Clock = std::chrono::steady_clock;

/// A socket address built from a validated literal and a port.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  [[nodiscard]] const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};
[[nodiscard]] Result<SockAddr> make_sockaddr(const IpAddress& ip, std::uint16_t port);

/// A non-blocking, close-on-exec UDP socket of the address's family.
[[nodiscard]] Result<UniqueFd> udp_socket(bool ipv6);

/// Milliseconds for poll() until `deadline`: at least 1 while it lies ahead, 0 once passed.
[[nodiscard]] int poll_timeout_ms(Clock::time_point now, Clock::time_point deadline);

}  // namespace unetback::udpflow
