// The gratuitous ARP a resumed netfront-shim sends once its new backend is Connected: what
// Linux's arp_netdev_event sends on NETDEV_NOTIFY_PEERS (a broadcast ARP request for our own
// address, from it), so the bridge learns the guest's MAC on its new port at once.
#include "frontend-shim/guest_netdev.hpp"

#include <gtest/gtest.h>

namespace unetback::shim {
namespace {

std::vector<std::uint8_t> bytes(const std::vector<std::byte>& f, std::size_t at, std::size_t n) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = at; i < at + n; ++i) out.push_back(static_cast<std::uint8_t>(f[i]));
  return out;
}

TEST(GratuitousArp, IsABroadcastRequestForOurOwnAddressFromIt) {
  const std::array<std::uint8_t, 6> mac{0x00, 0x16, 0x3e, 0x00, 0x00, 0x11};
  const std::array<std::uint8_t, 4> ip{10, 93, 0, 11};
  const auto f = gratuitous_arp(mac, ip);
  ASSERT_EQ(f.size(), 60U);  // the Ethernet minimum, zero-padded
  const std::vector<std::uint8_t> m(mac.begin(), mac.end());
  const std::vector<std::uint8_t> a(ip.begin(), ip.end());
  EXPECT_EQ(bytes(f, 0, 6), std::vector<std::uint8_t>(6, 0xff));  // to everyone
  EXPECT_EQ(bytes(f, 6, 6), m);
  EXPECT_EQ(bytes(f, 12, 2), (std::vector<std::uint8_t>{0x08, 0x06}));  // ARP
  // Ethernet/IPv4, 6- and 4-byte addresses, operation 1 (request).
  EXPECT_EQ(bytes(f, 14, 8), (std::vector<std::uint8_t>{0, 1, 8, 0, 6, 4, 0, 1}));
  EXPECT_EQ(bytes(f, 22, 6), m);                                // sender MAC
  EXPECT_EQ(bytes(f, 28, 4), a);                                // sender IP
  EXPECT_EQ(bytes(f, 32, 6), std::vector<std::uint8_t>(6, 0));  // target MAC: unknown
  EXPECT_EQ(bytes(f, 38, 4), a);                                // target IP: our own
  EXPECT_EQ(bytes(f, 42, 18), std::vector<std::uint8_t>(18, 0));
}

TEST(GuestNetdev, NoAddressForADeviceThatDoesNotExist) {
  EXPECT_FALSE(ipv4_address("nosuchdev0").has_value());
  EXPECT_FALSE(ipv4_address(std::string(40, 'x')).has_value());  // longer than IFNAMSIZ
}

}  // namespace
}  // namespace unetback::shim
