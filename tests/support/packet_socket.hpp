// PacketSocket: the host side of a network interface for tests: an AF_PACKET raw socket bound
// to one interface (a guest's TAP, a switch's uplink), which sends whole Ethernet frames into
// it and receives what crosses it, leaving out the frames it sent itself.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <cstddef>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <optional>
#include <poll.h>
#include <span>
#include <string>
#include <sys/socket.h>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace unetback::test {

class PacketSocket {
 public:
  PacketSocket() = default;

  /// A socket bound to interface `ifindex` (every protocol); with `vnet_hdr`, each frame read or
  /// written starts with a virtio_net_hdr (PACKET_VNET_HDR). Invalid (valid() false, errno set)
  /// if the socket could not be made or bound.
  static PacketSocket open(int ifindex, bool vnet_hdr = false) {
    PacketSocket s;
    s.fd_.reset(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
    if (!s.fd_.valid()) return s;
    const int one = 1;
    if (vnet_hdr && ::setsockopt(s.fd_.get(), SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) {
      s.fd_.reset();
      return s;
    }
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = ifindex;
    if (::bind(s.fd_.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) s.fd_.reset();
    return s;
  }
  /// The same, for the interface named `ifname` (invalid if there is none).
  static PacketSocket open(const std::string& ifname, bool vnet_hdr = false) {
    const unsigned idx = ::if_nametoindex(ifname.c_str());
    if (idx == 0) return {};
    return open(static_cast<int>(idx), vnet_hdr);
  }

  [[nodiscard]] bool valid() const { return fd_.valid(); }
  [[nodiscard]] int get() const { return fd_.get(); }
  void reset() { fd_.reset(); }

  /// Sends one frame into the interface; true if all of it went. `flags` as for send(2).
  bool send(std::span<const std::byte> frame, int flags = 0) const {
    return ::send(fd_.get(), frame.data(), frame.size(), flags) ==
           static_cast<ssize_t>(frame.size());
  }

  /// The next frame that came out of the interface (not one this host sent), or nullopt once
  /// `timeout` passed without one.
  [[nodiscard]] std::optional<std::vector<std::byte>> receive(
      std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::byte> buf(kMaxFrame);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      sockaddr_ll from{};
      socklen_t fl = sizeof from;
      const ssize_t n = ::recvfrom(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT,
                                   reinterpret_cast<sockaddr*>(&from), &fl);
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
      buf.resize(static_cast<std::size_t>(n));
      return buf;
    }
  }
  /// Frames that came out of the interface, collected until `n` arrived or `timeout` passed.
  [[nodiscard]] std::vector<std::vector<std::byte>> receive(
      std::size_t n, std::chrono::milliseconds timeout) const {
    std::vector<std::vector<std::byte>> out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out.size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      auto f = receive(left);
      if (!f) break;
      out.push_back(std::move(*f));
    }
    return out;
  }

  /// Room for the largest frame an interface passes up (a GSO super-frame with its header).
  static constexpr std::size_t kMaxFrame = 70000;

 private:
  UniqueFd fd_;
};

}  // namespace unetback::test
