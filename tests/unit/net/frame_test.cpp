// Header parsing (Ethernet/VLAN/IPv4/IPv6 extension headers/TCP/UDP), its bounds against
// truncated or hostile input, MAC text strictness, and the frame builder's output.
#include "common/net/frame.hpp"

#include <gtest/gtest.h>
#include <vector>

#include "common/net/bytes.hpp"
#include "common/net/frame_builder.hpp"

namespace unetback::net {
namespace {

TEST(MacAddress, ParsesCanonicalForm) {
  auto mac = parse_mac("00:16:3e:00:00:01");
  ASSERT_TRUE(mac);
  EXPECT_EQ(mac->octets, (std::array<std::uint8_t, 6>{0x00, 0x16, 0x3e, 0x00, 0x00, 0x01}));
  EXPECT_EQ(format_mac(*mac), "00:16:3e:00:00:01");
}

TEST(MacAddress, AcceptsUpperCaseAndFormatsLowerCase) {
  auto mac = parse_mac("FE:FF:Ab:cD:00:9f");
  ASSERT_TRUE(mac);
  EXPECT_EQ(format_mac(*mac), "fe:ff:ab:cd:00:9f");
  EXPECT_TRUE(mac->is_zero() == false);
}

TEST(MacAddress, RejectsEverythingButExactlySixTwoDigitColonSeparatedOctets) {
  for (const char* bad :
       {"0:16:3e:0:0:1", "00-16-3e-00-00-01", "00:16:3e:00:00:01:02", "zz:16:3e:00:00:01",
        "00:16:3e:00:00:01 ", " 00:16:3e:00:00:01", "00:16:3e:00:00:01\n", "00:16:3e:00:00", "",
        "00:16:3e:00:00:0g", "00:16:3e:00:00:+1", "00.16.3e.00.00.01", "0016.3e00.0001",
        "00:16:3e:00:00:1", "00:16:3e:00:000:1"}) {
    auto mac = parse_mac(bad);
    EXPECT_FALSE(mac) << '"' << bad << '"';
    EXPECT_EQ(mac.error(), NetError::bad_mac) << bad;
    EXPECT_EQ(mac.error(), std::errc::invalid_argument);
  }
  // An embedded NUL after a valid prefix is trailing junk too.
  EXPECT_FALSE(parse_mac(std::string_view("00:16:3e:00:00:01\0", 18)));
}

TEST(MacAddress, MulticastBit) {
  EXPECT_TRUE(parse_mac("01:00:5e:00:00:01")->is_multicast());
  EXPECT_FALSE(parse_mac("00:16:3e:00:00:01")->is_multicast());
}

TEST(ParseHeaders, Ipv4Tcp) {
  FrameSpec spec;
  spec.payload_len = 100;
  auto f = build_frame(spec);
  auto info = parse_headers(f);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->l2_len, 14u);
  EXPECT_FALSE(info->vlan);
  EXPECT_EQ(info->l3_proto, kEtherTypeIpv4);
  EXPECT_EQ(info->l3_offset, 14u);
  EXPECT_EQ(info->l4_proto, kIpProtoTcp);
  EXPECT_EQ(info->l4_offset, 34u);
  EXPECT_EQ(info->l4_header_len, 20u);
  EXPECT_EQ(info->headers_len(), 54u);
  EXPECT_FALSE(info->is_fragment);
}

TEST(ParseHeaders, Ipv4OptionsAndTcpOptionsMoveTheOffsets) {
  FrameSpec spec;
  spec.ipv4_options_len = 12;
  spec.tcp_options_len = 12;
  auto f = build_frame(spec);
  auto info = parse_headers(f);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->l4_offset, 14u + 32u);
  EXPECT_EQ(info->l4_header_len, 32u);
}

TEST(ParseHeaders, VlanTaggedUdp) {
  FrameSpec spec;
  spec.vlan_tci = 0x2064;
  spec.l4 = L4Proto::udp;
  auto f = build_frame(spec);
  auto info = parse_headers(f);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->l2_len, 18u);
  EXPECT_EQ(info->vlan, 0x2064);
  EXPECT_EQ(info->l3_proto, kEtherTypeIpv4);
  EXPECT_EQ(info->l4_proto, kIpProtoUdp);
  EXPECT_EQ(info->l4_offset, 38u);
  EXPECT_EQ(info->l4_header_len, 8u);
}

TEST(ParseHeaders, Ipv6SkipsHopByHopRoutingDestOptsAndAtomicFragment) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.ipv6_ext_headers = {0, 43, 44, 60};
  spec.payload_len = 10;
  auto f = build_frame(spec);
  auto info = parse_headers(f);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->l3_proto, kEtherTypeIpv6);
  EXPECT_EQ(info->l4_proto, kIpProtoTcp);
  EXPECT_EQ(info->l4_offset, 14u + 40u + 32u);
  EXPECT_EQ(info->l4_header_len, 20u);
  EXPECT_FALSE(info->is_fragment);  // offset 0, M clear: an atomic fragment is whole
}

TEST(ParseHeaders, Ipv6ExtensionChainIsBounded) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.ipv6_ext_headers.assign(kMaxIpv6ExtHeaders, 60);
  EXPECT_TRUE(parse_headers(build_frame(spec)));
  spec.ipv6_ext_headers.assign(kMaxIpv6ExtHeaders + 1, 60);
  auto info = parse_headers(build_frame(spec));
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error(), NetError::too_many_ext_headers);
}

TEST(ParseHeaders, Ipv4FragmentsAreMarkedAndOnlyTheFirstHasAnL4Header) {
  FrameSpec spec;
  spec.ipv4_frag_field = 0x2000;  // MF, offset 0
  auto first = parse_headers(build_frame(spec));
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->is_fragment);
  EXPECT_TRUE(first->first_fragment);
  EXPECT_EQ(first->l4_header_len, 20u);

  spec.ipv4_frag_field = 0x0010;  // offset 16*8, last fragment
  auto later = parse_headers(build_frame(spec));
  ASSERT_TRUE(later);
  EXPECT_TRUE(later->is_fragment);
  EXPECT_FALSE(later->first_fragment);
  EXPECT_EQ(later->l4_header_len, 0u);
}

TEST(ParseHeaders, Ipv6NonFirstFragmentStopsTheWalk) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.ipv6_ext_headers = {44};
  auto f = build_frame(spec);
  const std::size_t frag = 14 + 40;
  store_be16(f, frag + 2, 0x0008);  // offset 1 (in 8-byte units), M clear
  auto info = parse_headers(f);
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->is_fragment);
  EXPECT_FALSE(info->first_fragment);
  EXPECT_EQ(info->l4_offset, frag + 8);
  EXPECT_EQ(info->l4_header_len, 0u);
}

TEST(ParseHeaders, NonIpFrameParsesWithoutL4) {
  std::vector<std::byte> arp(60);
  store_be16(arp, 12, 0x0806);
  auto info = parse_headers(arp);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->l3_proto, 0x0806);
  EXPECT_EQ(info->l4_proto, 0);
  EXPECT_EQ(info->l4_header_len, 0u);
}

TEST(ParseHeaders, EveryTruncationBeforeTheEndOfTheHeadersIsReported) {
  for (auto spec_ip : {IpVersion::v4, IpVersion::v6}) {
    FrameSpec spec;
    spec.ip = spec_ip;
    spec.vlan_tci = 5;
    spec.tcp_options_len = 8;
    if (spec_ip == IpVersion::v6) spec.ipv6_ext_headers = {0, 60};
    auto f = build_frame(spec);
    auto full = parse_headers(f);
    ASSERT_TRUE(full);
    for (std::size_t len = 0; len < full->headers_len(); ++len) {
      auto r = parse_headers(std::span<const std::byte>(f).first(len));
      ASSERT_FALSE(r) << "len " << len;
      EXPECT_EQ(r.error(), NetError::truncated) << "len " << len;
    }
    EXPECT_TRUE(parse_headers(std::span<const std::byte>(f).first(full->headers_len())));
  }
}

TEST(ParseHeaders, ImpossibleLengthFieldsAreBadHeaders) {
  FrameSpec spec;
  auto f = build_frame(spec);
  auto bad_ihl = f;
  bad_ihl[14] = std::byte{0x44};  // IHL 4 words < 5
  EXPECT_EQ(parse_headers(bad_ihl).error(), NetError::bad_header);
  auto bad_version = f;
  bad_version[14] = std::byte{0x65};  // says IPv6 under an IPv4 EtherType
  EXPECT_EQ(parse_headers(bad_version).error(), NetError::bad_header);
  auto bad_doff = f;
  bad_doff[34 + 12] = std::byte{0x40};  // TCP data offset 4 words < 5
  EXPECT_EQ(parse_headers(bad_doff).error(), NetError::bad_header);
  auto long_doff = f;
  long_doff[34 + 12] = std::byte{0xF0};  // 60-byte TCP header in a 54-byte frame
  EXPECT_EQ(parse_headers(long_doff).error(), NetError::truncated);
}

TEST(FrameBuilder, ChecksumsVerifyForEveryShape) {
  for (auto ip : {IpVersion::v4, IpVersion::v6}) {
    for (auto l4 : {L4Proto::tcp, L4Proto::udp}) {
      for (std::size_t payload : {0u, 1u, 17u, 1000u, 1461u, 9000u}) {
        FrameSpec spec;
        spec.ip = ip;
        spec.l4 = l4;
        spec.payload_len = payload;
        spec.payload_seed = static_cast<std::uint8_t>(payload);
        spec.vlan_tci = payload % 2 == 0 ? std::optional<std::uint16_t>(7) : std::nullopt;
        auto f = build_frame(spec);
        auto ok = verify_l4_checksum(f);
        ASSERT_TRUE(ok) << ok.error().message();
        EXPECT_TRUE(*ok) << "payload " << payload;
        EXPECT_TRUE(*verify_ipv4_header_checksum(f));
        if (payload > 0) {
          f.back() ^= std::byte{0x01};
          EXPECT_FALSE(*verify_l4_checksum(f)) << "payload " << payload;
        }
      }
    }
  }
}

TEST(FrameBuilder, PartialModeLeavesThePseudoHeaderSum) {
  FrameSpec spec;
  spec.payload_len = 50;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  auto info = parse_headers(f);
  ASSERT_TRUE(info);
  auto pseudo = pseudo_header_sum(f, *info, f.size() - info->l4_offset);
  ASSERT_TRUE(pseudo);
  EXPECT_EQ(load_be16(f, info->l4_offset + kTcpChecksumOffset), *pseudo);
  EXPECT_FALSE(*verify_l4_checksum(f));
}

TEST(FrameBuilder, EthernetPaddingIsIgnoredByTheVerifier) {
  FrameSpec spec;
  spec.l4 = L4Proto::udp;
  spec.payload_len = 2;
  auto f = build_frame(spec);
  f.resize(60, std::byte{0xEE});  // minimum Ethernet frame, padded with junk
  EXPECT_TRUE(*verify_l4_checksum(f));
}

TEST(FrameBuilder, RejectsImpossibleSpecs) {
  FrameSpec spec;
  spec.tcp_options_len = 3;
  EXPECT_THROW((void)build_frame(spec), std::invalid_argument);
  spec.tcp_options_len = 0;
  spec.payload_len = 70000;
  EXPECT_THROW((void)build_frame(spec), std::invalid_argument);
}

}  // namespace
}  // namespace unetback::net
