// Guest-TX request chains: each netback rule on a ring written by a (possibly hostile)
// frontend.
#include "backend/vif/tx_request_parser.hpp"

#include <gtest/gtest.h>
#include <vector>

namespace unetback::vif {
namespace {

using wire::ExtraInfo;
using wire::TxRequest;

struct alignas(4096) Page {
  std::byte bytes[4096];
};

class TxParser : public ::testing::Test {
 protected:
  TxParser() : front_(ring::TxFrontRing::init(page_.bytes)) {}

  /// A packet of `sizes` (first = total in the wire format) with more_data chaining.
  void put_packet(const std::vector<std::uint16_t>& slot_sizes, std::uint16_t first_flags = 0,
                  std::uint16_t offset = 0) {
    std::uint32_t total = 0;
    for (auto s : slot_sizes) total += s;
    for (std::size_t i = 0; i < slot_sizes.size(); ++i) {
      TxRequest r{};
      r.gref = static_cast<std::uint32_t>(100 + i);
      r.offset = offset;
      r.id = next_id_++;
      r.size = i == 0 ? static_cast<std::uint16_t>(total) : slot_sizes[i];
      r.flags = static_cast<std::uint16_t>((i == 0 ? first_flags : 0) |
                                           (i + 1 < slot_sizes.size() ? NETTXF_more_data : 0));
      front_.put_request(r);
    }
  }
  void put(const TxRequest& r) { front_.put_request(r); }
  void put_extra(const ExtraInfo& e) { front_.put_request_as(e); }
  TxPacket parse(TxParseLimits limits = {}) {
    (void)front_.push_requests();
    if (!back_) back_.emplace(*ring::TxBackRing::attach(page_.bytes));
    return parse_tx_packet(*back_, limits);
  }
  ring::TxBackRing& back() { return *back_; }

  Page page_{};
  ring::TxFrontRing front_;
  std::optional<ring::TxBackRing> back_;
  std::uint16_t next_id_ = 0;
};

TEST_F(TxParser, SingleSlotPacketIsAccepted) {
  put_packet({1514});
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::ok);
  EXPECT_EQ(p.nr_slots, 1u);
  EXPECT_EQ(p.total_len, 1514u);
  EXPECT_EQ(p.slots[0].size, 1514);
  EXPECT_EQ(p.slots[0].gref, GrantRef{100});
  EXPECT_EQ(p.ring_slots(), 1u);
}

TEST_F(TxParser, FirstSlotOwnSizeIsTotalMinusFrags) {
  put_packet({2000, 4096, 1000});
  const TxPacket p = parse();
  ASSERT_EQ(p.verdict, TxVerdict::ok);
  ASSERT_EQ(p.nr_slots, 3u);
  EXPECT_EQ(p.total_len, 7096u);
  EXPECT_EQ(p.slots[0].size, 2000);
  EXPECT_EQ(p.slots[1].size, 4096);
  EXPECT_EQ(p.slots[2].size, 1000);
  EXPECT_EQ(back().req_cons().value(), 3u);
}

TEST_F(TxParser, EighteenSlotsAreAccepted) {
  put_packet(std::vector<std::uint16_t>(18, 1000));
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::ok);
  EXPECT_EQ(p.nr_slots, 18u);
}

TEST_F(TxParser, NineteenSlotsAreDroppedAndEverySlotIsConsumed) {
  put_packet(std::vector<std::uint16_t>(19, 1000));
  put_packet({100});  // the next packet must still parse
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::drop);
  EXPECT_EQ(p.error, TxError::too_many_slots);
  EXPECT_EQ(p.nr_frags, 18u);
  EXPECT_EQ(p.ring_slots(), 19u);
  for (std::uint32_t i = 0; i < p.nr_frags; ++i) EXPECT_EQ(p.frag_ids[i], i + 1);
  const TxPacket next = parse_tx_packet(back(), {});
  EXPECT_EQ(next.verdict, TxVerdict::ok);
  EXPECT_EQ(next.first_id, 19);
}

TEST_F(TxParser, TwentySlotsMarkTheFrontendMalicious) {
  put_packet(std::vector<std::uint16_t>(20, 100));
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::fatal);
  EXPECT_EQ(p.error, TxError::fatal_slot_count);
}

TEST_F(TxParser, FatalSlotThresholdIsATunable) {
  put_packet(std::vector<std::uint16_t>(24, 100));
  const TxPacket p = parse(TxParseLimits{30});
  EXPECT_EQ(p.verdict, TxVerdict::drop);  // over 18, under 30
  EXPECT_EQ(p.ring_slots(), 24u);
}

TEST_F(TxParser, FragLargerThanTheRestOfThePacketIsDropped) {
  TxRequest first{};
  first.gref = 1;
  first.size = 1000;  // claims 1000 in total
  first.flags = NETTXF_more_data;
  put(first);
  TxRequest frag{};
  frag.gref = 2;
  frag.size = 2000;  // but the frag alone is 2000
  frag.id = 1;
  put(frag);
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::drop);
  EXPECT_EQ(p.error, TxError::frag_larger_than_rest);
  EXPECT_EQ(p.ring_slots(), 2u);
}

TEST_F(TxParser, FirstSlotShorterThanAnEthernetHeaderIsDropped) {
  put_packet({13});
  EXPECT_EQ(parse().error, TxError::runt_first_slot);
}

TEST_F(TxParser, TinyFirstSlotFollowedByDataIsDroppedAsRunt) {
  put_packet({10, 1500});  // first slot holds 10 bytes: less than ETH_HLEN
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::drop);
  EXPECT_EQ(p.error, TxError::runt_first_slot);
}

TEST_F(TxParser, ZeroSizeNonFirstSlotsAreKeptForAnOkayResponse) {
  put_packet({100, 0, 200});  // XSA-448: the path answers and skips the empty slot
  const TxPacket p = parse();
  ASSERT_EQ(p.verdict, TxVerdict::ok);
  EXPECT_EQ(p.nr_slots, 3u);
  EXPECT_EQ(p.slots[1].size, 0);
}

TEST_F(TxParser, FragCrossingItsPageIsFatal) {
  TxRequest first{};
  first.size = 2000;
  first.flags = NETTXF_more_data;
  put(first);
  TxRequest frag{};
  frag.offset = 3000;
  frag.size = 1500;  // 3000 + 1500 > 4096
  put(frag);
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::fatal);
  EXPECT_EQ(p.error, TxError::slot_crosses_page);
}

TEST_F(TxParser, FirstSlotCrossingItsPageIsFatal) {
  put_packet({1000}, 0, 3500);
  EXPECT_EQ(parse().error, TxError::slot_crosses_page);
}

TEST_F(TxParser, ChainRunningPastThePublishedRequestsIsFatal) {
  TxRequest first{};
  first.size = 3000;
  first.flags = NETTXF_more_data;
  put(first);
  TxRequest frag{};
  frag.size = 1000;
  frag.flags = NETTXF_more_data;  // promises another request that is never published
  put(frag);
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::fatal);
  EXPECT_EQ(p.error, TxError::chain_past_available);
}

TEST_F(TxParser, GsoExtraIsParsed) {
  TxRequest first{};
  first.gref = 7;
  first.size = 1514;
  first.flags = NETTXF_extra_info | NETTXF_csum_blank;
  put(first);
  ExtraInfo gso{};
  gso.type = XEN_NETIF_EXTRA_TYPE_GSO;
  gso.u.gso.type = XEN_NETIF_GSO_TYPE_TCPV4;
  gso.u.gso.size = 1448;
  put_extra(gso);
  const TxPacket p = parse();
  ASSERT_EQ(p.verdict, TxVerdict::ok);
  ASSERT_TRUE(p.gso.has_value());
  EXPECT_EQ(p.gso->type, wire::GsoType::tcpv4);
  EXPECT_EQ(p.gso->size, 1448);
  EXPECT_EQ(p.nr_extras, 1u);
  EXPECT_EQ(p.ring_slots(), 2u);
  EXPECT_TRUE(p.flags.has(wire::TxFlag::csum_blank));
}

class TxParserBadGso
    : public TxParser,
      public ::testing::WithParamInterface<std::pair<std::uint8_t, std::uint16_t>> {};

TEST_P(TxParserBadGso, IsDropped) {
  TxRequest first{};
  first.size = 1514;
  first.flags = NETTXF_extra_info;
  put(first);
  ExtraInfo gso{};
  gso.type = XEN_NETIF_EXTRA_TYPE_GSO;
  gso.u.gso.type = GetParam().first;
  gso.u.gso.size = GetParam().second;
  put_extra(gso);
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::drop);
  EXPECT_EQ(p.error, TxError::bad_gso);
  EXPECT_EQ(p.ring_slots(), 2u);
}

INSTANTIATE_TEST_SUITE_P(SizeZeroOrUnknownType, TxParserBadGso,
                         ::testing::Values(std::make_pair(XEN_NETIF_GSO_TYPE_TCPV4, 0),
                                           std::make_pair(XEN_NETIF_GSO_TYPE_NONE, 1448),
                                           std::make_pair(3, 1448), std::make_pair(255, 1448)));

TEST_F(TxParser, ExtraPromisedButNotPublishedIsFatal) {
  TxRequest first{};
  first.size = 100;
  first.flags = NETTXF_extra_info;
  put(first);
  EXPECT_EQ(parse().error, TxError::missing_extra);
}

class TxParserBadExtraType : public TxParser, public ::testing::WithParamInterface<std::uint8_t> {};

TEST_P(TxParserBadExtraType, IsFatal) {
  TxRequest first{};
  first.size = 100;
  first.flags = NETTXF_extra_info;
  put(first);
  ExtraInfo e{};
  e.type = GetParam();
  put_extra(e);
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::fatal);
  EXPECT_EQ(p.error, TxError::bad_extra_type);
}

INSTANTIATE_TEST_SUITE_P(NoneOrBeyondMax, TxParserBadExtraType,
                         ::testing::Values(XEN_NETIF_EXTRA_TYPE_NONE, XEN_NETIF_EXTRA_TYPE_MAX,
                                           200));

TEST_F(TxParser, EndlessExtraChainStopsAtThePublishedRequests) {
  TxRequest first{};
  first.size = 100;
  first.flags = NETTXF_extra_info;
  put(first);
  ExtraInfo e{};
  e.type = XEN_NETIF_EXTRA_TYPE_HASH;
  e.flags = XEN_NETIF_EXTRA_FLAG_MORE;
  for (int i = 0; i < 255; ++i) put_extra(e);
  const TxPacket p = parse();
  EXPECT_EQ(p.verdict, TxVerdict::fatal);
  EXPECT_EQ(p.error, TxError::missing_extra);
  EXPECT_EQ(p.nr_extras, 255u);
}

TEST_F(TxParser, MulticastAddIsADummyRequestWithoutFrags) {
  TxRequest first{};
  first.size = 0;
  first.id = 42;
  first.flags = NETTXF_extra_info;
  put(first);
  ExtraInfo e{};
  e.type = XEN_NETIF_EXTRA_TYPE_MCAST_ADD;
  const std::uint8_t mac[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb};
  std::copy(std::begin(mac), std::end(mac), e.u.mcast.addr);
  put_extra(e);
  const TxPacket p = parse();
  ASSERT_EQ(p.verdict, TxVerdict::mcast);
  ASSERT_TRUE(p.mcast.has_value());
  EXPECT_TRUE(p.mcast->add);
  EXPECT_EQ(p.mcast->addr[5], 0xfb);
  EXPECT_EQ(p.first_id, 42);
  EXPECT_EQ(p.ring_slots(), 2u);
}

// A frontend publishes an absurd req_prod and chains more_data through every slot: the
// parser never looks at more than the ring holds and gives up with a fatal verdict.
TEST_F(TxParser, HostileProducerNeverMakesTheParserReadPastTheRing) {
  for (int i = 0; i < 256; ++i) {
    TxRequest r{};
    r.size = 100;
    r.flags = NETTXF_more_data;
    put(r);
  }
  (void)front_.push_requests();
  back_.emplace(*ring::TxBackRing::attach(page_.bytes));
  auto* hdr = reinterpret_cast<ring::SharedRingHeader*>(page_.bytes);
  hdr->req_prod = 0x7FFFFFFF;
  const TxPacket p = parse_tx_packet(*back_, TxParseLimits{64});
  EXPECT_EQ(p.verdict, TxVerdict::fatal);
  EXPECT_LE(back_->req_cons().value(), 256u);
}

}  // namespace
}  // namespace unetback::vif
