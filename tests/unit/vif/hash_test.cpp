// Toeplitz hashing against the published Microsoft RSS verification vectors ("Verifying the
// RSS Hash Calculation": the 40-byte key below, IPv4 and IPv6, addresses only and with TCP
// ports), and the fields a guest-RX frame is hashed over (netif.h "Hash types").
#include "backend/vif/hash.hpp"

#include <arpa/inet.h>
#include <array>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "common/wire/netif.hpp"

namespace unetback::vif {
namespace {

constexpr std::array<std::uint8_t, 40> kMsKey{
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

struct Vector {
  const char* src;
  std::uint16_t sport;
  const char* dst;
  std::uint16_t dport;
  std::uint32_t addresses;  // IPv4 / IPv6 (2-tuple)
  std::uint32_t with_tcp;   // IPv4+TCP / IPv6+TCP (4-tuple)
};

// The verification table: source, destination, and the two expected hashes.
constexpr Vector kIpv4[] = {
    {"66.9.149.187", 2794, "161.142.100.80", 1766, 0x323e8fc2, 0x51ccc178},
    {"199.92.111.2", 14230, "65.69.140.83", 4739, 0xd718262a, 0xc626b0ea},
    {"24.19.198.95", 12898, "12.22.207.184", 38024, 0xd2d0a5de, 0x5c2b394a},
    {"38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xafc7327f},
    {"153.39.163.191", 44251, "202.188.127.2", 1303, 0x5d1809c5, 0x10e828a2},
};
constexpr Vector kIpv6[] = {
    {"3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2cc18cd5, 0x40207d3d},
    {"3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0f0c461c, 0xdde51bbf},
    {"3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024, 0x4b61e985,
     0x02d1feef},
};

std::vector<std::uint8_t> addr(int af, const char* text) {
  std::vector<std::uint8_t> out(af == AF_INET ? 4 : 16);
  EXPECT_EQ(inet_pton(af, text, out.data()), 1) << text;
  return out;
}

void put_port(std::vector<std::uint8_t>& v, std::uint16_t port) {
  v.push_back(static_cast<std::uint8_t>(port >> 8));
  v.push_back(static_cast<std::uint8_t>(port));
}

/// netif.h's input buffers: source + destination address, then source + destination port.
std::vector<std::uint8_t> input(int af, const Vector& v, bool tcp) {
  auto in = addr(af, v.src);
  const auto d = addr(af, v.dst);
  in.insert(in.end(), d.begin(), d.end());
  if (tcp) {
    put_port(in, v.sport);
    put_port(in, v.dport);
  }
  return in;
}

TEST(Toeplitz, MatchesTheMicrosoftIpv4Vectors) {
  for (const auto& v : kIpv4) {
    EXPECT_EQ(toeplitz_hash(kMsKey, input(AF_INET, v, false)), v.addresses) << v.src;
    EXPECT_EQ(toeplitz_hash(kMsKey, input(AF_INET, v, true)), v.with_tcp) << v.src;
  }
}

TEST(Toeplitz, MatchesTheMicrosoftIpv6Vectors) {
  for (const auto& v : kIpv6) {
    EXPECT_EQ(toeplitz_hash(kMsKey, input(AF_INET6, v, false)), v.addresses) << v.src;
    EXPECT_EQ(toeplitz_hash(kMsKey, input(AF_INET6, v, true)), v.with_tcp) << v.src;
  }
}

TEST(Toeplitz, ShortKeyIsZeroPaddedAndEmptyKeyHashesToZero) {
  const auto in = input(AF_INET6, kIpv6[0], true);  // 36 bytes: key bits up to 320 are used
  std::array<std::uint8_t, 40> padded{};
  std::copy_n(kMsKey.begin(), 16, padded.begin());
  EXPECT_EQ(toeplitz_hash(std::span(kMsKey.data(), 16), in), toeplitz_hash(padded, in));
  EXPECT_EQ(toeplitz_hash({}, in), 0u);
}

// ---------------------------------------------------------------------------------------
// Frames

std::vector<std::byte> eth(std::uint16_t ethertype, const std::vector<std::uint8_t>& l3) {
  std::vector<std::byte> f(14);
  f[12] = std::byte(ethertype >> 8);
  f[13] = std::byte(ethertype & 0xff);
  for (auto b : l3) f.push_back(std::byte(b));
  return f;
}

/// The rest of a 20-byte TCP header after the ports (sequence, ack, data offset 5, ...).
void tcp_rest(std::vector<std::uint8_t>& p) {
  const std::size_t at = p.size();
  p.resize(at + 16, 0);
  p[at + 8] = 0x50;
}

std::vector<std::uint8_t> ipv4_packet(const Vector& v, std::uint8_t proto, std::uint16_t frag) {
  std::vector<std::uint8_t> p(20, 0);
  p[0] = 0x45;
  p[6] = static_cast<std::uint8_t>(frag >> 8);
  p[7] = static_cast<std::uint8_t>(frag);
  p[8] = 64;
  p[9] = proto;
  const auto s = addr(AF_INET, v.src), d = addr(AF_INET, v.dst);
  std::copy(s.begin(), s.end(), p.begin() + 12);
  std::copy(d.begin(), d.end(), p.begin() + 16);
  put_port(p, v.sport);
  put_port(p, v.dport);
  tcp_rest(p);
  return p;
}

std::vector<std::uint8_t> ipv6_packet(const Vector& v, std::uint8_t next) {
  std::vector<std::uint8_t> p(40, 0);
  p[0] = 0x60;
  p[6] = next;
  p[7] = 64;
  const auto s = addr(AF_INET6, v.src), d = addr(AF_INET6, v.dst);
  std::copy(s.begin(), s.end(), p.begin() + 8);
  std::copy(d.begin(), d.end(), p.begin() + 24);
  put_port(p, v.sport);
  put_port(p, v.dport);
  tcp_rest(p);
  return p;
}

HashSettings settings(std::uint32_t flags) {
  HashSettings s;
  s.toeplitz = true;
  s.flags = flags;
  s.key = kMsKey;
  s.num_queues = 4;
  return s;
}

TEST(HashFrame, Ipv4TcpFrameIsHashedOverTheFourTupleWhenTheFlagsAskForIt) {
  const auto f = eth(0x0800, ipv4_packet(kIpv4[0], 6, 0));
  const auto h = hash_frame(settings(wire::kHashTypeIpv4 | wire::kHashTypeIpv4Tcp), f);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->value, 0x51ccc178u);
  EXPECT_EQ(h->type, _XEN_NETIF_CTRL_HASH_TYPE_IPV4_TCP);
}

TEST(HashFrame, Ipv4TcpFrameIsHashedOverAddressesWithoutTheTcpFlag) {
  const auto f = eth(0x0800, ipv4_packet(kIpv4[1], 6, 0));
  const auto h = hash_frame(settings(wire::kHashTypeIpv4), f);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->value, 0xd718262au);
  EXPECT_EQ(h->type, _XEN_NETIF_CTRL_HASH_TYPE_IPV4);
}

TEST(HashFrame, UdpAndFragmentsAreNeverHashedAsTcp) {
  const auto s = settings(wire::kHashTypeIpv4 | wire::kHashTypeIpv4Tcp);
  const auto udp = hash_frame(s, eth(0x0800, ipv4_packet(kIpv4[2], 17, 0)));
  ASSERT_TRUE(udp);
  EXPECT_EQ(udp->value, 0xd2d0a5deu);
  const auto first_frag = hash_frame(s, eth(0x0800, ipv4_packet(kIpv4[2], 6, 0x2000)));
  ASSERT_TRUE(first_frag);
  EXPECT_EQ(first_frag->value, 0xd2d0a5deu) << "MF set: addresses only";
  const auto later_frag = hash_frame(s, eth(0x0800, ipv4_packet(kIpv4[2], 6, 0x0010)));
  ASSERT_TRUE(later_frag);
  EXPECT_EQ(later_frag->type, _XEN_NETIF_CTRL_HASH_TYPE_IPV4);
  // Only the TCP type asked for: a UDP packet gets no hash at all.
  EXPECT_FALSE(
      hash_frame(settings(wire::kHashTypeIpv4Tcp), eth(0x0800, ipv4_packet(kIpv4[2], 17, 0))));
}

TEST(HashFrame, Ipv6FramesMatchTheVectorsIncludingBehindADestinationOptionsHeader) {
  const auto s = settings(wire::kHashTypeIpv6 | wire::kHashTypeIpv6Tcp);
  for (const auto& v : kIpv6) {
    const auto h = hash_frame(s, eth(0x86dd, ipv6_packet(v, 6)));
    ASSERT_TRUE(h);
    EXPECT_EQ(h->value, v.with_tcp);
    EXPECT_EQ(h->type, _XEN_NETIF_CTRL_HASH_TYPE_IPV6_TCP);
  }
  // Next header 60 (8 bytes) before TCP.
  auto p = ipv6_packet(kIpv6[1], 60);
  const std::vector<std::uint8_t> opts{6, 0, 1, 4, 0, 0, 0, 0};
  p.insert(p.begin() + 40, opts.begin(), opts.end());
  const auto h = hash_frame(s, eth(0x86dd, p));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->value, kIpv6[1].with_tcp);
  const auto l3 = hash_frame(settings(wire::kHashTypeIpv6), eth(0x86dd, ipv6_packet(kIpv6[0], 6)));
  ASSERT_TRUE(l3);
  EXPECT_EQ(l3->value, kIpv6[0].addresses);
}

TEST(HashFrame, NothingWithoutAnAlgorithmFlagsForTheFamilyOrAWholeHeader) {
  const auto f = eth(0x0800, ipv4_packet(kIpv4[0], 6, 0));
  auto none = settings(wire::kHashTypesAll);
  none.toeplitz = false;
  EXPECT_FALSE(hash_frame(none, f));
  EXPECT_FALSE(hash_frame(settings(wire::kHashTypeIpv6 | wire::kHashTypeIpv6Tcp), f));
  EXPECT_FALSE(
      hash_frame(settings(wire::kHashTypesAll), eth(0x0806, std::vector<std::uint8_t>(28))));
  for (std::size_t cut = 0; cut < 14 + 20; ++cut)
    EXPECT_FALSE(hash_frame(settings(wire::kHashTypesAll), std::span(f.data(), cut))) << cut;
  // The addresses there but the TCP header cut short: the frame is refused, not guessed at.
  EXPECT_FALSE(hash_frame(settings(wire::kHashTypesAll), std::span(f.data(), 14 + 20 + 2)));
}

TEST(HashQueue, TheMappingNamesTheQueueElseHashModuloQueues) {
  auto s = settings(wire::kHashTypesAll);
  EXPECT_EQ(hash_queue(s, 10), 10u % 4);
  s.mapping = {3, 1, 2};
  EXPECT_EQ(hash_queue(s, 0x51ccc178), s.mapping[0x51ccc178 % 3]);
  EXPECT_EQ(hash_queue(s, 4), 1u);
}

}  // namespace
}  // namespace unetback::vif
