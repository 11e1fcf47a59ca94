// The netif <-> virtio_net_hdr offload mapping, both directions, rule by rule.
#include "common/net/vnet_hdr.hpp"

#include <cstring>
#include <gtest/gtest.h>
#include <vector>

#include "common/net/bytes.hpp"
#include "common/net/checksum.hpp"
#include "common/net/frame_builder.hpp"

namespace unetback::net {
namespace {

using wire::GsoType;
using wire::RxFlag;
using wire::RxFlags;
using wire::TxFlag;
using wire::TxFlags;

GuestTxOffload tx(TxFlags flags, std::optional<GsoInfo> gso = std::nullopt) {
  return GuestTxOffload{flags, gso};
}

// ---- Guest TX -> TAP ----------------------------------------------------------------------

TEST(GuestTxToVnet, NoFlagsGivesAnEmptyHeaderWithoutParsing) {
  std::vector<std::byte> junk(20, std::byte{0xAB});  // not a valid frame: never looked at
  auto r = map_guest_tx(tx({}), junk, junk.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.hdr.flags, 0);
  EXPECT_EQ(r->hdr.hdr.gso_type, VIRTIO_NET_HDR_GSO_NONE);
  EXPECT_EQ(r->hdr.num_buffers, 0);
  EXPECT_FALSE(r->headers);
}

TEST(GuestTxToVnet, DataValidatedBecomesDataValid) {
  std::vector<std::byte> junk(20, std::byte{0xAB});
  auto r = map_guest_tx(tx(TxFlag::data_validated), junk, junk.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.hdr.flags, VIRTIO_NET_HDR_F_DATA_VALID);
}

TEST(GuestTxToVnet, CsumBlankIpv4TcpNeedsCsumAtTcpChecksumField) {
  FrameSpec spec;
  spec.checksum = L4ChecksumMode::partial;
  spec.payload_len = 200;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank), std::span(f).first(128), f.size());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->hdr.hdr.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
  EXPECT_EQ(r->hdr.hdr.csum_start, 34);
  EXPECT_EQ(r->hdr.hdr.csum_offset, 16);
  EXPECT_EQ(r->hdr.hdr.gso_type, VIRTIO_NET_HDR_GSO_NONE);
  EXPECT_FALSE(r->needs_partial_fixup);
}

TEST(GuestTxToVnet, CsumBlankAndDataValidatedIsStillPartial) {
  FrameSpec spec;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank | TxFlag::data_validated), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.hdr.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
}

TEST(GuestTxToVnet, CsumBlankIpv4UdpUsesUdpChecksumOffset) {
  FrameSpec spec;
  spec.l4 = L4Proto::udp;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.hdr.csum_start, 34);
  EXPECT_EQ(r->hdr.hdr.csum_offset, 6);
}

TEST(GuestTxToVnet, CsumBlankIpv6TcpAfterExtensionHeaders) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.ipv6_ext_headers = {0, 43, 60};
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank), f, f.size());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->hdr.hdr.csum_start, 14 + 40 + 24);
  EXPECT_EQ(r->hdr.hdr.csum_offset, 16);
}

TEST(GuestTxToVnet, CsumBlankVlanTaggedShiftsCsumStart) {
  FrameSpec spec;
  spec.vlan_tci = 100;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.hdr.csum_start, 38);
}

TEST(GuestTxToVnet, GsoTcpv4SetsTypeSizeAndHdrLen) {
  FrameSpec spec;
  spec.tcp_options_len = 12;  // timestamps, as Linux sends them
  spec.payload_len = 20000;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv4, 1448}),
                        std::span(f).first(128), f.size());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->hdr.hdr.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
  EXPECT_EQ(r->hdr.hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
  EXPECT_EQ(r->hdr.hdr.gso_size, 1448);
  EXPECT_EQ(r->hdr.hdr.hdr_len, 14 + 20 + 32);
  EXPECT_EQ(r->hdr.hdr.csum_start, 34);
  EXPECT_EQ(r->hdr.hdr.csum_offset, 16);
  EXPECT_FALSE(r->needs_partial_fixup);
}

TEST(GuestTxToVnet, GsoTcpv6SetsTypeSizeAndHdrLen) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.vlan_tci = 3;
  spec.payload_len = 10000;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv6, 1428}), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV6);
  EXPECT_EQ(r->hdr.hdr.gso_size, 1428);
  EXPECT_EQ(r->hdr.hdr.hdr_len, 18 + 40 + 20);
  EXPECT_EQ(r->hdr.hdr.csum_start, 58);
}

TEST(GuestTxToVnet, GsoWithoutCsumBlankIsForcedPartialAndThePseudoHeaderRewritten) {
  // netback checksum_setup: a GSO packet without csum_blank becomes CHECKSUM_PARTIAL with the
  // pseudo-header checksum recomputed, whatever the guest left in the field.
  FrameSpec spec;
  spec.payload_len = 5000;
  spec.checksum = L4ChecksumMode::zero;
  auto f = build_frame(spec);
  store_be16(f, 34 + 16, 0xDEAD);  // garbage in the checksum field
  auto expect_partial = build_frame([&] {
    FrameSpec p = spec;
    p.checksum = L4ChecksumMode::partial;
    return p;
  }());

  const GuestTxOffload off = tx({}, GsoInfo{GsoType::tcpv4, 1448});
  auto mapped = map_guest_tx(off, f, f.size());
  ASSERT_TRUE(mapped);
  EXPECT_TRUE(mapped->needs_partial_fixup);
  EXPECT_EQ(mapped->hdr.hdr.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);

  std::vector<std::byte> head(f.begin(), f.begin() + 128);  // the TX path's linear copy
  auto hdr = prepare_guest_tx(off, head, f.size());
  ASSERT_TRUE(hdr);
  EXPECT_EQ(load_be16(head, 34 + 16), load_be16(expect_partial, 34 + 16));
  EXPECT_EQ(hdr->hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);

  // And completing that partial checksum yields a frame whose checksum verifies.
  std::copy(head.begin(), head.end(), f.begin());
  std::span<std::byte> whole(f);
  const std::span<std::byte> frags[] = {whole};
  ASSERT_FALSE(complete_checksum(frags, hdr->hdr.csum_start, hdr->hdr.csum_offset));
  EXPECT_TRUE(*verify_l4_checksum(f));
}

TEST(GuestTxToVnet, PrepareLeavesCsumBlankFramesUntouched) {
  FrameSpec spec;
  spec.payload_len = 3000;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  const auto before = f;
  auto hdr = prepare_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv4, 1448}), f, f.size());
  ASSERT_TRUE(hdr);
  EXPECT_EQ(f, before);
}

TEST(GuestTxToVnet, GsoWithoutTcpHeaderIsRejected) {
  FrameSpec spec;
  spec.l4 = L4Proto::udp;
  spec.payload_len = 4000;
  auto udp = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv4, 1448}), udp, udp.size());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), NetError::no_transport_header);

  std::vector<std::byte> arp(60);
  store_be16(arp, 12, 0x0806);
  auto a = map_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv4, 1448}), arp, arp.size());
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error(), NetError::no_transport_header);
}

TEST(GuestTxToVnet, GsoSizeZeroOrGsoByFragsOrTypeNoneIsBadGso) {
  auto f = build_frame(FrameSpec{});
  for (GsoInfo gso : {GsoInfo{GsoType::tcpv4, 0}, GsoInfo{GsoType::tcpv4, 0xFFFF},
                      GsoInfo{GsoType::none, 1448}, GsoInfo{static_cast<GsoType>(7), 1448}}) {
    auto r = map_guest_tx(tx(TxFlag::csum_blank, gso), f, f.size());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), NetError::bad_gso);
    EXPECT_EQ(r.error(), std::errc::invalid_argument);
  }
}

TEST(GuestTxToVnet, GsoTypeMustMatchIpVersion) {
  FrameSpec v6spec;
  v6spec.ip = IpVersion::v6;
  auto v6 = build_frame(v6spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv4, 1448}), v6, v6.size());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), NetError::gso_type_mismatch);
  auto v4 = build_frame(FrameSpec{});
  auto r4 = map_guest_tx(tx(TxFlag::csum_blank, GsoInfo{GsoType::tcpv6, 1448}), v4, v4.size());
  ASSERT_FALSE(r4);
  EXPECT_EQ(r4.error(), NetError::gso_type_mismatch);
}

TEST(GuestTxToVnet, HeadersOutsideTheLinearBytesAreTruncated) {
  FrameSpec spec;
  spec.payload_len = 500;
  auto f = build_frame(spec);
  auto r = map_guest_tx(tx(TxFlag::csum_blank), std::span(f).first(40), f.size());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), NetError::truncated);
  // A frame_len shorter than the buffer bounds the parse too.
  auto s = map_guest_tx(tx(TxFlag::csum_blank), f, 50);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), NetError::truncated);
}

TEST(GuestTxToVnet, CsumBlankOnFragmentOrNonTcpUdpOrNonIpIsRejected) {
  FrameSpec frag;
  frag.ipv4_frag_field = 0x2000;
  auto f = build_frame(frag);
  EXPECT_EQ(map_guest_tx(tx(TxFlag::csum_blank), f, f.size()).error(), NetError::fragment);

  auto icmp = build_frame(FrameSpec{});
  icmp[14 + 9] = std::byte{1};  // protocol ICMP
  EXPECT_EQ(map_guest_tx(tx(TxFlag::csum_blank), icmp, icmp.size()).error(),
            NetError::unsupported_protocol);

  std::vector<std::byte> arp(60);
  store_be16(arp, 12, 0x0806);
  EXPECT_EQ(map_guest_tx(tx(TxFlag::csum_blank), arp, arp.size()).error(),
            NetError::unsupported_protocol);
}

// ---- TAP -> guest RX ----------------------------------------------------------------------

VirtioNetHdr vnet(std::uint8_t flags, std::uint8_t gso_type = VIRTIO_NET_HDR_GSO_NONE,
                  std::uint16_t gso_size = 0, std::uint16_t csum_start = 0,
                  std::uint16_t csum_offset = 0) {
  VirtioNetHdr h{};
  h.hdr.flags = flags;
  h.hdr.gso_type = gso_type;
  h.hdr.gso_size = gso_size;
  h.hdr.csum_start = csum_start;
  h.hdr.csum_offset = csum_offset;
  return h;
}

FrontendOffloads linux_netfront() {
  return FrontendOffloads{
      .gso_tcpv4 = true, .gso_tcpv6 = true, .csum_ipv4 = true, .csum_ipv6 = true, .sg = true};
}

TEST(TapRxToGuest, NeedsCsumBecomesCsumBlankAndDataValidated) {
  FrameSpec spec;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  auto r =
      map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 34, 16), linux_netfront(), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->flags, RxFlag::csum_blank | RxFlag::data_validated);
  EXPECT_FALSE(r->gso);
  EXPECT_FALSE(r->complete_checksum);
}

TEST(TapRxToGuest, DataValidBecomesDataValidated) {
  auto f = build_frame(FrameSpec{});
  auto r = map_tap_rx(vnet(VIRTIO_NET_HDR_F_DATA_VALID), linux_netfront(), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->flags, RxFlags(RxFlag::data_validated));
}

TEST(TapRxToGuest, NoFlagsNoMetadata) {
  std::vector<std::byte> tiny(3);  // nothing to parse: never looked at
  auto r = map_tap_rx(vnet(0), linux_netfront(), tiny, tiny.size());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->flags.empty());
  EXPECT_FALSE(r->gso);
}

TEST(TapRxToGuest, GsoTcpv4BecomesGsoExtraAndTheEcnBitIsDropped) {
  FrameSpec spec;
  spec.payload_len = 30000;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  auto r = map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM,
                           VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN, 1448, 34, 16),
                      linux_netfront(), f, f.size());
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(r->gso);
  EXPECT_EQ(*r->gso, (GsoInfo{GsoType::tcpv4, 1448}));
  EXPECT_EQ(r->flags, RxFlag::csum_blank | RxFlag::data_validated);
}

TEST(TapRxToGuest, GsoTcpv6BecomesGsoExtra) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.payload_len = 30000;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  auto r = map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1428, 54, 16),
                      linux_netfront(), f, f.size());
  ASSERT_TRUE(r);
  EXPECT_EQ(*r->gso, (GsoInfo{GsoType::tcpv6, 1428}));
}

TEST(TapRxToGuest, GsoOnlyWhenTheFrontendAskedForThatType) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.payload_len = 30000;
  auto f = build_frame(spec);
  const auto h = vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1428, 54, 16);
  FrontendOffloads fe = linux_netfront();
  fe.gso_tcpv6 = false;
  EXPECT_EQ(map_tap_rx(h, fe, f, f.size()).error(), NetError::gso_not_negotiated);
  fe = linux_netfront();
  fe.sg = false;  // a super-frame needs several slots
  EXPECT_EQ(map_tap_rx(h, fe, f, f.size()).error(), NetError::gso_not_negotiated);
  fe = linux_netfront();
  fe.csum_ipv6 = false;  // and a partial checksum the guest accepts
  EXPECT_EQ(map_tap_rx(h, fe, f, f.size()).error(), NetError::gso_not_negotiated);
}

TEST(TapRxToGuest, UdpGsoTypesAreRejectedWithAReason) {
  FrameSpec spec;
  spec.l4 = L4Proto::udp;
  spec.payload_len = 4000;
  auto f = build_frame(spec);
  for (std::uint8_t type : {std::uint8_t{VIRTIO_NET_HDR_GSO_UDP}, kVirtioGsoUdpL4}) {
    auto r = map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, type, 1472, 34, 6), linux_netfront(), f,
                        f.size());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), NetError::unsupported_gso_type);
    EXPECT_EQ(r.error(), std::errc::not_supported);
  }
}

TEST(TapRxToGuest, UnknownGsoTypeOrZeroSizeIsBadGso) {
  auto f = build_frame(FrameSpec{});
  EXPECT_EQ(
      map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, 9, 1448, 34, 16), linux_netfront(), f, f.size())
          .error(),
      NetError::bad_gso);
  EXPECT_EQ(map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 0, 34, 16),
                       linux_netfront(), f, f.size())
                .error(),
            NetError::bad_gso);
}

TEST(TapRxToGuest, GsoTypeMustMatchTheFrame) {
  auto f = build_frame(FrameSpec{});  // IPv4
  EXPECT_EQ(map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1448, 34, 16),
                       linux_netfront(), f, f.size())
                .error(),
            NetError::gso_type_mismatch);
}

TEST(TapRxToGuest, ChecksumOffsetsOutsideTheFrameAreRejected) {
  auto f = build_frame(FrameSpec{});
  auto r =
      map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 50, 16), linux_netfront(), f, f.size());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), NetError::bad_checksum_offsets);
}

// Splits `f` at the given cut points into fragments (spans into f).
std::vector<std::span<std::byte>> split(std::vector<std::byte>& f, std::vector<std::size_t> cuts) {
  std::vector<std::span<std::byte>> out;
  std::size_t pos = 0;
  cuts.push_back(f.size());
  for (std::size_t cut : cuts) {
    out.push_back(std::span<std::byte>(f).subspan(pos, cut - pos));
    pos = cut;
  }
  return out;
}

TEST(TapRxToGuest, FrontendWithoutIpv4CsumOffloadGetsACompletedChecksum) {
  FrameSpec spec;
  spec.payload_len = 3001;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  FrontendOffloads fe = linux_netfront();
  fe.csum_ipv4 = false;  // feature-no-csum-offload=1
  fe.gso_tcpv4 = false;
  auto r = map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 34, 16), fe, f, f.size());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->complete_checksum);
  EXPECT_EQ(r->csum_start, 34);
  EXPECT_EQ(r->csum_offset, 16);
  EXPECT_EQ(r->flags, RxFlags(RxFlag::data_validated));  // never csum_blank
  EXPECT_FALSE(*verify_l4_checksum(f));

  // The frame arrives in pieces; one cut splits the checksum field itself (at 34+16+1).
  auto frags = split(f, {7, 33, 51, 1000, 1001, 2999});
  ASSERT_FALSE(complete_checksum(frags, r->csum_start, r->csum_offset));
  EXPECT_TRUE(*verify_l4_checksum(f));
}

TEST(TapRxToGuest, Ipv6PartialChecksumCompletedForFrontendWithoutIpv6Offload) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.l4 = L4Proto::udp;
  spec.ipv6_ext_headers = {60};
  spec.payload_len = 777;
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  FrontendOffloads fe;  // defaults: feature-ipv6-csum-offload absent
  auto r = map_tap_rx(vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 62, 6), fe, f, f.size());
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->complete_checksum);
  auto frags = split(f, {63, 64, 65});
  ASSERT_FALSE(complete_checksum(frags, r->csum_start, r->csum_offset));
  EXPECT_TRUE(*verify_l4_checksum(f));
}

TEST(CompleteChecksum, ZeroResultIsSentAsAllOnes) {
  // Arrange the payload so the finished UDP checksum would be 0: RFC 768 sends it as FFFF.
  FrameSpec spec;
  spec.l4 = L4Proto::udp;
  spec.payload_len = 10;  // the last two payload bytes sit at an even L4 offset (16)
  spec.checksum = L4ChecksumMode::partial;
  auto f = build_frame(spec);
  f[f.size() - 2] = std::byte{0};
  f[f.size() - 1] = std::byte{0};
  ChecksumAccumulator acc;
  acc.add(std::span<const std::byte>(f).subspan(34));
  store_be16(f, f.size() - 2, static_cast<std::uint16_t>(~acc.folded()));
  std::span<std::byte> whole(f);
  const std::span<std::byte> frags[] = {whole};
  ASSERT_FALSE(complete_checksum(frags, 34, 6));
  EXPECT_EQ(load_be16(f, 34 + 6), 0xFFFF);
  EXPECT_TRUE(*verify_l4_checksum(f));
}

TEST(CompleteChecksum, FieldOutsideTheFrameIsAnError) {
  std::vector<std::byte> f(40);
  std::span<std::byte> whole(f);
  const std::span<std::byte> frags[] = {whole};
  EXPECT_EQ(complete_checksum(frags, 30, 9), NetError::bad_checksum_offsets);
  EXPECT_EQ(complete_checksum(frags, 41, 0), NetError::bad_checksum_offsets);
  EXPECT_FALSE(complete_checksum(frags, 30, 8));
}

TEST(VnetHdr, LoadsFromTheFrontOfABuffer) {
  std::vector<std::byte> buf(kVnetHdrLen + 1);
  VirtioNetHdr h = vnet(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1448, 34, 16);
  std::memcpy(buf.data(), &h, sizeof h);
  auto loaded = load_vnet_hdr(buf);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->hdr.gso_size, 1448);
  EXPECT_EQ(loaded->hdr.csum_start, 34);
  EXPECT_FALSE(load_vnet_hdr(std::span(buf).first(kVnetHdrLen - 1)));
}

TEST(NetError, NamesAndGenericEquivalents) {
  EXPECT_STREQ(net_error_name(NetError::no_transport_header), "no_transport_header");
  std::error_code ec = NetError::truncated;
  EXPECT_EQ(ec, std::errc::message_size);
  EXPECT_FALSE(ec.message().empty());
  EXPECT_EQ(std::error_code(NetError::fragment), std::errc::protocol_error);
}

}  // namespace
}  // namespace unetback::net
