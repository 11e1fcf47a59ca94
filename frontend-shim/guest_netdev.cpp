#include "frontend-shim/guest_netdev.hpp"

#include <array>
#include <cstring>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util/unique_fd.hpp"

extern char** environ;

namespace unetback::shim {

std::error_code enter_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return last_errno();
  if (::setns(fd.get(), CLONE_NEWNET) != 0) return last_errno();
  return {};
}

std::error_code add_address(const std::string& ifname, const std::string& cidr) {
  // iproute2 lives in /usr/sbin (merged /sbin); a root PATH may lack it, so try the usual
  // places rather than trusting PATH.
  static constexpr std::array<const char*, 4> kCandidates = {"/usr/sbin/ip", "/sbin/ip",
                                                             "/usr/bin/ip", "/bin/ip"};
  const char* ip = nullptr;
  for (const char* c : kCandidates) {
    if (::access(c, X_OK) == 0) {
      ip = c;
      break;
    }
  }
  if (!ip) return std::make_error_code(std::errc::no_such_file_or_directory);
  // argv is built from validated values and passed as separate words: no shell involved.
  std::string a0 = "ip", a1 = "addr", a2 = "add", a4 = "dev";
  std::string addr = cidr, dev = ifname;
  char* argv[] = {a0.data(), a1.data(), a2.data(), addr.data(), a4.data(), dev.data(), nullptr};
  pid_t pid = -1;
  if (const int rc = ::posix_spawn(&pid, ip, nullptr, nullptr, argv, environ); rc != 0)
    return {rc, std::generic_category()};
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return last_errno();
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::make_error_code(std::errc::invalid_argument);
  return {};
}

Result<net::TapDevice> create_guest_tap(const net::TapConfig& config, const std::string& address,
                                        std::string& what) {
  what = "create TAP " + config.name;
  auto tap = net::TapDevice::create(config);
  if (!tap) return tap.error();
  what = "bring " + config.name + " up";
  if (auto ec = tap->set_up(true)) return ec;
  if (!address.empty()) {
    what = "add address " + address + " to " + config.name;
    if (auto ec = add_address(config.name, address)) return ec;
  }
  what.clear();
  return std::move(*tap);
}

std::optional<std::array<std::uint8_t, 4>> ipv4_address(const std::string& ifname) {
  if (ifname.size() >= IFNAMSIZ) return std::nullopt;
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return std::nullopt;
  ifreq req{};
  std::memcpy(req.ifr_name, ifname.data(), ifname.size());
  if (::ioctl(sock.get(), SIOCGIFADDR, &req) != 0) return std::nullopt;
  sockaddr_in sin{};
  std::memcpy(&sin, &req.ifr_addr, sizeof sin);
  std::array<std::uint8_t, 4> ip{};
  std::memcpy(ip.data(), &sin.sin_addr.s_addr, ip.size());
  return ip;
}

std::vector<std::byte> gratuitous_arp(const std::array<std::uint8_t, 6>& mac,
                                      const std::array<std::uint8_t, 4>& ip) {
  constexpr std::size_t kMinFrame = 60;
  std::vector<std::byte> f;
  f.reserve(kMinFrame);
  auto put = [&f](std::initializer_list<std::uint8_t> bytes) {
    for (const std::uint8_t b : bytes) f.push_back(std::byte{b});
  };
  auto put_array = [&f](const auto& a) {
    for (const std::uint8_t b : a) f.push_back(std::byte{b});
  };
  put({0xff, 0xff, 0xff, 0xff, 0xff, 0xff});  // to everyone
  put_array(mac);
  put({0x08, 0x06});              // ARP
  put({0x00, 0x01, 0x08, 0x00});  // Ethernet, IPv4
  put({6, 4, 0x00, 0x01});        // address lengths, request
  put_array(mac);                 // sender: us
  put_array(ip);
  put({0, 0, 0, 0, 0, 0});  // target MAC unknown, target IP: our own
  put_array(ip);
  f.resize(kMinFrame, std::byte{0});
  return f;
}

}  // namespace unetback::shim
