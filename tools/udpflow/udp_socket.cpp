#include "tools/udpflow/udp_socket.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>

namespace unetback::udpflow {

Result<SockAddr> make_sockaddr(const IpAddress& ip, std::uint16_t port) {
  SockAddr a;
  if (ip.ipv6) {
    sockaddr_in6 s{};
    s.sin6_family = AF_INET6;
    s.sin6_port = htons(port);
    if (::inet_pton(AF_INET6, ip.text.c_str(), &s.sin6_addr) != 1)
      return std::errc::invalid_argument;
    std::memcpy(&a.storage, &s, sizeof s);
    a.len = sizeof s;
  } else {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    s.sin_port = htons(port);
    if (::inet_pton(AF_INET, ip.text.c_str(), &s.sin_addr) != 1) return std::errc::invalid_argument;
    std::memcpy(&a.storage, &s, sizeof s);
    a.len = sizeof s;
  }
  return a;
}

Result<UniqueFd> udp_socket(bool ipv6) {
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return last_errno();
  return UniqueFd(fd);
}

int poll_timeout_ms(Clock::time_point now, Clock::time_point deadline) {
  if (now >= deadline) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 1, 1000));
}

}  // namespace unetback::udpflow
