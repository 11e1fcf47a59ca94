// --tx-frags: a frame laid out as a Linux-like slot chain (header slot, then odd-offset
// payload pieces), as seed 003's coalescing experiment needs its senders to produce.
#include "frontend-shim/tx_frag_layout.hpp"

#include <gtest/gtest.h>
#include <numeric>
#include <vector>

#include "common/net/frame_builder.hpp"

namespace unetback::shim {
namespace {

using net::FrameSpec;
using net::IpVersion;
using net::L4Proto;

std::vector<std::byte> frame(IpVersion ip, L4Proto l4, std::size_t payload,
                             std::size_t tcp_options = 0) {
  FrameSpec spec;
  spec.ip = ip;
  spec.l4 = l4;
  spec.payload_len = payload;
  spec.tcp_options_len = tcp_options;
  return net::build_frame(spec);
}

std::size_t total(const TxFragLayout& l) {
  std::size_t sum = 0;
  for (const auto& s : l.span()) sum += s.size;
  return sum;
}

// Properties every chain has: sizes add up, no slot crosses its page, the payload pieces
// sit at odd offsets unless they fill a page, only the last piece is short.
void expect_well_formed(const TxFragLayout& l, std::size_t frame_len, std::uint32_t frag) {
  ASSERT_GE(l.count, 1u);
  ASSERT_LE(l.count, kMaxTxFragSlots);
  EXPECT_EQ(total(l), frame_len);
  EXPECT_EQ(l.slots[0].size, l.header_len);
  EXPECT_GE(l.slots[0].size, wire::kEthHeaderLen);
  for (std::uint32_t i = 0; i < l.count; ++i) {
    const auto& s = l.slots[i];
    EXPECT_LE(std::size_t{s.offset} + s.size, wire::kPageSize) << "slot " << i;
    EXPECT_GT(s.size, 0u) << "slot " << i;
    if (i == 0) continue;
    if (s.size < wire::kPageSize) {
      EXPECT_EQ(s.offset % 2, 1) << "slot " << i;
      // As far toward the page end as an odd offset allows.
      EXPECT_GE(std::size_t{s.offset} + s.size, wire::kPageSize - 1) << "slot " << i;
    }
    if (i + 1 < l.count) {
      EXPECT_EQ(s.size, frag) << "slot " << i;
    } else {
      EXPECT_LE(s.size, frag);
    }
  }
}

TEST(TxFragLayout, TcpV4HeaderSlotHoldsEthernetIpAndTcpHeaders) {
  const auto f = frame(IpVersion::v4, L4Proto::tcp, 3000);
  auto l = plan_tx_frags(f, 1024);
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_TRUE(l->headers_parsed);
  EXPECT_EQ(l->header_len, 14u + 20 + 20);
  EXPECT_EQ(l->count, 1u + 3);  // 1024 + 1024 + 952
  EXPECT_EQ(l->slots[3].size, 3000u - 2048);
  expect_well_formed(*l, f.size(), 1024);
}

TEST(TxFragLayout, TcpOptionsAreInTheHeaderSlot) {
  const auto f = frame(IpVersion::v4, L4Proto::tcp, 500, 12);
  auto l = plan_tx_frags(f, 4096);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->header_len, 14u + 20 + 32);
  expect_well_formed(*l, f.size(), 4096);
}

TEST(TxFragLayout, UdpV4HeaderSlotIsTwentyEightBytesPastEthernet) {
  const auto f = frame(IpVersion::v4, L4Proto::udp, 1472);
  auto l = plan_tx_frags(f, 512);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->header_len, 14u + 20 + 8);
  EXPECT_EQ(l->count, 1u + 3);
  expect_well_formed(*l, f.size(), 512);
}

TEST(TxFragLayout, Ipv6HeaderSlotIncludesTheFixedHeader) {
  const auto tcp = frame(IpVersion::v6, L4Proto::tcp, 9000);
  auto l = plan_tx_frags(tcp, 4096);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->header_len, 14u + 40 + 20);
  EXPECT_EQ(l->count, 1u + 3);
  expect_well_formed(*l, tcp.size(), 4096);

  const auto udp = frame(IpVersion::v6, L4Proto::udp, 100);
  auto u = plan_tx_frags(udp, 64);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->header_len, 14u + 40 + 8);
  EXPECT_EQ(u->count, 1u + 2);  // 64 + 36
  expect_well_formed(*u, udp.size(), 64);
}

TEST(TxFragLayout, Ipv6ExtensionHeadersAreInTheHeaderSlot) {
  FrameSpec spec;
  spec.ip = IpVersion::v6;
  spec.l4 = L4Proto::udp;
  spec.ipv6_ext_headers = {0, 60};
  spec.payload_len = 1000;
  const auto f = net::build_frame(spec);
  auto l = plan_tx_frags(f, 1000);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->header_len, 14u + 40 + 16 + 8);
  EXPECT_EQ(l->count, 2u);
  expect_well_formed(*l, f.size(), 1000);
}

TEST(TxFragLayout, VlanTaggedFrameCountsTheTag) {
  FrameSpec spec;
  spec.vlan_tci = 42;
  spec.payload_len = 100;
  const auto f = net::build_frame(spec);
  auto l = plan_tx_frags(f, 64);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->header_len, 18u + 20 + 20);
}

TEST(TxFragLayout, UnparsableFrameSendsItsFirst64BytesFirst) {
  std::vector<std::byte> arp(200, std::byte{0x5a});
  arp[12] = std::byte{0x08};
  arp[13] = std::byte{0x06};  // ARP: not IP
  auto l = plan_tx_frags(arp, 100);
  ASSERT_TRUE(l);
  EXPECT_FALSE(l->headers_parsed);
  EXPECT_EQ(l->header_len, kTxFragUnparsedHeaderLen);
  EXPECT_EQ(l->count, 1u + 2);  // 100 + 36
  expect_well_formed(*l, arp.size(), 100);

  // A truncated IPv4 header does not parse either; a short frame is all header.
  auto t = frame(IpVersion::v4, L4Proto::tcp, 0);
  t.resize(30);
  auto s = plan_tx_frags(t, 64);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->headers_parsed);
  EXPECT_EQ(s->count, 1u);
  EXPECT_EQ(s->header_len, 30u);
}

TEST(TxFragLayout, HeaderOnlyFrameIsOneSlot) {
  const auto f = frame(IpVersion::v4, L4Proto::tcp, 0);  // a pure ACK
  auto l = plan_tx_frags(f, 1024);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->count, 1u);
  EXPECT_EQ(l->slots[0].offset, kTxFragHeaderOffset);
  expect_well_formed(*l, f.size(), 1024);
}

TEST(TxFragLayout, PieceOffsetsAreOddAndStayInsideThePage) {
  EXPECT_EQ(tx_frag_offset(64), 4031);    // 4032 rounded down to odd
  EXPECT_EQ(tx_frag_offset(1000), 3095);  // 3096 -> 3095
  EXPECT_EQ(tx_frag_offset(1001), 3095);  // already odd
  EXPECT_EQ(tx_frag_offset(4094), 1);     // 2 -> 1
  EXPECT_EQ(tx_frag_offset(4095), 1);
  EXPECT_EQ(tx_frag_offset(4096), 0);  // a full page has no odd placement
  for (std::uint32_t size = 1; size <= 4096; ++size) {
    const std::uint32_t off = tx_frag_offset(size);
    EXPECT_LE(off + size, wire::kPageSize) << size;
    if (size < 4096) {
      EXPECT_EQ(off % 2, 1u) << size;
    }
  }
}

TEST(TxFragLayout, EveryFrameLengthAndFragSizeGivesAWellFormedChain) {
  for (std::uint32_t frag : {64u, 100u, 1023u, 1024u, 2048u, 4095u, 4096u}) {
    for (std::size_t payload :
         {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{frag}, std::size_t{frag} + 1,
          std::size_t{3} * frag, std::size_t{17} * frag}) {
      if (payload > 65000) continue;  // beyond an IPv4 packet
      const auto f = frame(IpVersion::v4, L4Proto::tcp, payload);
      auto l = plan_tx_frags(f, frag);
      if (f.size() <= wire::kMaxTxSize) {
        ASSERT_TRUE(l) << "frag " << frag << " payload " << payload << ": " << l.error().message();
        expect_well_formed(*l, f.size(), frag);
      }
    }
  }
}

TEST(TxFragLayout, MoreThanEighteenSlotsFallsBackToTheNormalLayout) {
  // 17 pieces + the header slot is the most netback takes.
  const auto fits = frame(IpVersion::v4, L4Proto::tcp, 17 * 1000);
  auto l = plan_tx_frags(fits, 1000);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->count, kMaxTxFragSlots);
  expect_well_formed(*l, fits.size(), 1000);

  const auto over = frame(IpVersion::v4, L4Proto::tcp, 17 * 1000 + 1);
  auto o = plan_tx_frags(over, 1000);
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error(), std::errc::argument_list_too_long);

  // A 64 KiB TSO frame in 64-byte pieces is far beyond the limit.
  const auto tso = frame(IpVersion::v4, L4Proto::tcp, 60000);
  EXPECT_EQ(plan_tx_frags(tso, 64).error(), std::errc::argument_list_too_long);
  // ...but fits in 4096-byte pieces (15 of them).
  auto t = plan_tx_frags(tso, 4096);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->count, 1u + 15);
}

TEST(TxFragLayout, RejectsBadSizesAndFrames) {
  const auto f = frame(IpVersion::v4, L4Proto::udp, 100);
  EXPECT_EQ(plan_tx_frags(f, 63).error(), std::errc::invalid_argument);
  EXPECT_EQ(plan_tx_frags(f, 4097).error(), std::errc::invalid_argument);
  std::vector<std::byte> runt(13);
  EXPECT_EQ(plan_tx_frags(runt, 1024).error(), std::errc::invalid_argument);
  std::vector<std::byte> huge(wire::kMaxTxSize + 1);
  EXPECT_EQ(plan_tx_frags(huge, 4096).error(), std::errc::message_size);
}

}  // namespace
}  // namespace unetback::shim
