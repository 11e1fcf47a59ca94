// RX response validation with Linux netfront's rules (xennet_get_responses and friends).
#include "frontend-shim/rx_response_parser.hpp"

#include <cstring>
#include <gtest/gtest.h>
#include <vector>

namespace unetback::netfront {
namespace {

using wire::RxFlag;
using wire::RxFlags;

wire::RxResponse data(std::int16_t status, RxFlags flags = {}, std::uint16_t offset = 0) {
  wire::RxResponse r{};
  r.id = 0;
  r.offset = offset;
  r.flags = flags.raw();
  r.status = status;
  return r;
}

wire::RxResponse extra(std::uint8_t type, bool more = false, std::uint16_t gso_size = 1448,
                       std::uint8_t gso_type = XEN_NETIF_GSO_TYPE_TCPV4) {
  wire::ExtraInfo e{};
  e.type = type;
  e.flags = more ? XEN_NETIF_EXTRA_FLAG_MORE : 0;
  if (type == XEN_NETIF_EXTRA_TYPE_GSO) {
    e.u.gso.size = gso_size;
    e.u.gso.type = gso_type;
  }
  wire::RxResponse r{};
  std::memcpy(&r, &e, sizeof(e));
  return r;
}

/// A packet of `n` full data slots (the last `last` bytes), optionally with a GSO extra.
std::vector<wire::RxResponse> chain(std::uint32_t n, std::int16_t last, bool gso = false) {
  std::vector<wire::RxResponse> v;
  for (std::uint32_t i = 0; i < n; ++i) {
    RxFlags f;
    if (i + 1 < n) f |= RxFlag::more_data;
    if (i == 0 && gso) f |= RxFlag::extra_info;
    v.push_back(data(i + 1 < n ? 4096 : last, f));
    if (i == 0 && gso) v.push_back(extra(XEN_NETIF_EXTRA_TYPE_GSO));
  }
  return v;
}

TEST(RxResponseParser, EmptySpanConsumesNothing) {
  EXPECT_EQ(parse_rx_packet({}).consumed, 0U);
}

TEST(RxResponseParser, SingleSlotPacket) {
  const std::vector<wire::RxResponse> v{data(60, RxFlag::data_validated, 10), data(99)};
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::none);
  EXPECT_EQ(p.consumed, 1U);  // the next packet is left alone
  EXPECT_EQ(p.bytes, 60U);
  ASSERT_EQ(p.segment_count, 1U);
  EXPECT_EQ(p.segments[0].offset, 10);
  EXPECT_TRUE(p.flags.has(RxFlag::data_validated));
}

TEST(RxResponseParser, MultiSlotPacketWithGsoExtraAfterSlotZero) {
  const auto v = chain(3, 808, true);
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::none);
  EXPECT_EQ(p.consumed, 4U);
  EXPECT_EQ(p.data_slots, 3U);
  EXPECT_EQ(p.bytes, 4096U * 2 + 808);
  ASSERT_EQ(p.segment_count, 3U);
  // Data slot 0 at position 0, then the extra, then the continuation.
  EXPECT_EQ(p.segments[0].slot, 0U);
  EXPECT_EQ(p.segments[1].slot, 2U);
  EXPECT_EQ(p.segments[2].slot, 3U);
  ASSERT_TRUE(p.gso);
  EXPECT_EQ(p.gso->type, wire::GsoType::tcpv4);
  EXPECT_EQ(p.gso->size, 1448);
}

TEST(RxResponseParser, GsoThenHashExtraChainedWithMore) {
  // What the backend sends with the control ring's hashing on: GSO (MORE), then HASH.
  wire::ExtraInfo h{};
  h.type = XEN_NETIF_EXTRA_TYPE_HASH;
  h.u.hash.type = _XEN_NETIF_CTRL_HASH_TYPE_IPV4_TCP;
  h.u.hash.algorithm = XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ;
  const std::uint32_t value = 0x51ccc178;
  std::memcpy(h.u.hash.value, &value, 4);
  wire::RxResponse hash_slot{};
  std::memcpy(&hash_slot, &h, sizeof h);
  const std::vector<wire::RxResponse> v{data(4096, RxFlags{RxFlag::more_data} | RxFlag::extra_info),
                                        extra(XEN_NETIF_EXTRA_TYPE_GSO, true), hash_slot,
                                        data(100)};
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::none);
  EXPECT_EQ(p.consumed, 4U);
  EXPECT_EQ(p.bytes, 4196U);
  ASSERT_TRUE(p.gso);
  ASSERT_TRUE(p.hash);
  EXPECT_EQ(p.hash->value, value);
  EXPECT_EQ(p.hash->type, _XEN_NETIF_CTRL_HASH_TYPE_IPV4_TCP);
  EXPECT_EQ(p.hash->algorithm, XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ);
}

TEST(RxResponseParser, NegativeStatusDropsButConsumesTheChain) {
  auto v = chain(3, 100);
  v[1].status = -1;
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::bad_slot);
  EXPECT_EQ(p.consumed, 3U);
}

TEST(RxResponseParser, OffsetPlusStatusPastThePageDrops) {
  const std::vector<wire::RxResponse> v{data(100, {}, 4000)};
  EXPECT_EQ(parse_rx_packet(v).drop, RxDrop::bad_slot);
  const std::vector<wire::RxResponse> ok{data(96, {}, 4000)};
  EXPECT_EQ(parse_rx_packet(ok).drop, RxDrop::none);
}

TEST(RxResponseParser, EighteenSlotsPassNineteenOnlyWithASmallFirstSlot) {
  EXPECT_EQ(parse_rx_packet(chain(18, 100)).drop, RxDrop::none);
  // 19 slots with a full first slot: too many.
  const RxParse big = parse_rx_packet(chain(19, 100));
  EXPECT_EQ(big.drop, RxDrop::too_many_slots);
  EXPECT_EQ(big.consumed, 19U);
  // 19 slots whose first holds <= 256 bytes (pulled whole into the linear area): allowed.
  auto small = chain(19, 100);
  small[0].status = 256;
  EXPECT_EQ(parse_rx_packet(small).drop, RxDrop::none);
  small[0].status = 257;
  EXPECT_EQ(parse_rx_packet(small).drop, RxDrop::too_many_slots);
  auto twenty = chain(20, 100);
  twenty[0].status = 10;
  EXPECT_EQ(parse_rx_packet(twenty).drop, RxDrop::too_many_slots);
  EXPECT_EQ(parse_rx_packet(twenty).consumed, 20U);
}

TEST(RxResponseParser, TooManySlotsNamesTheDropEvenAfterABadSlot) {
  auto v = chain(20, 100);
  v[3].status = -1;
  EXPECT_EQ(parse_rx_packet(v).drop, RxDrop::too_many_slots);
}

TEST(RxResponseParser, MissingContinuationNeedsMoreSlots) {
  auto v = chain(3, 100);
  v.pop_back();  // the last published response still says more_data
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::need_more_slots);
  EXPECT_EQ(p.consumed, 2U);
}

TEST(RxResponseParser, ExtraFlagOnTheLastResponseIsAMissingExtra) {
  const std::vector<wire::RxResponse> v{data(60, RxFlag::extra_info)};
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::missing_extra);
  EXPECT_EQ(p.consumed, 1U);
}

TEST(RxResponseParser, ExtraTypesNoneAndBeyondMaxAreInvalid) {
  for (std::uint8_t type : {std::uint8_t{0}, wire::kExtraTypeMax, std::uint8_t{200}}) {
    const std::vector<wire::RxResponse> v{data(60, RxFlag::extra_info), extra(type)};
    const RxParse p = parse_rx_packet(v);
    EXPECT_EQ(p.drop, RxDrop::bad_extra_type) << int{type};
    EXPECT_EQ(p.consumed, 2U);
  }
}

TEST(RxResponseParser, ChainedExtrasAreAllSkipped) {
  const std::vector<wire::RxResponse> v{data(4096, RxFlag::extra_info | RxFlag::more_data),
                                        extra(XEN_NETIF_EXTRA_TYPE_HASH, true),
                                        extra(XEN_NETIF_EXTRA_TYPE_GSO), data(50)};
  const RxParse p = parse_rx_packet(v);
  EXPECT_EQ(p.drop, RxDrop::none);
  EXPECT_EQ(p.consumed, 4U);
  EXPECT_EQ(p.bytes, 4146U);
  ASSERT_EQ(p.segment_count, 2U);
  EXPECT_EQ(p.segments[1].slot, 3U);
  EXPECT_TRUE(p.gso);
}

TEST(RxResponseParser, GsoWithZeroSizeOrUnknownTypeIsDropped) {
  const std::vector<wire::RxResponse> zero{data(60, RxFlag::extra_info),
                                           extra(XEN_NETIF_EXTRA_TYPE_GSO, false, 0)};
  EXPECT_EQ(parse_rx_packet(zero).drop, RxDrop::bad_gso);
  const std::vector<wire::RxResponse> type{data(60, RxFlag::extra_info),
                                           extra(XEN_NETIF_EXTRA_TYPE_GSO, false, 1448, 7)};
  EXPECT_EQ(parse_rx_packet(type).drop, RxDrop::bad_gso);
  const std::vector<wire::RxResponse> v6{
      data(60, RxFlag::extra_info),
      extra(XEN_NETIF_EXTRA_TYPE_GSO, false, 1428, XEN_NETIF_GSO_TYPE_TCPV6)};
  EXPECT_EQ(parse_rx_packet(v6).drop, RxDrop::none);
}

TEST(RxResponseParser, DropReasonsHaveNames) {
  EXPECT_STREQ(rx_drop_name(RxDrop::too_many_slots), "too_many_slots");
  EXPECT_STREQ(rx_drop_name(RxDrop::need_more_slots), "need_more_slots");
}

}  // namespace
}  // namespace unetback::netfront

namespace unetback::netfront {
namespace {

/// `v` with each response's id set as netfront posted it: the ring index from `first`.
std::vector<wire::RxResponse> with_slot_ids(std::vector<wire::RxResponse> v, std::uint32_t first) {
  for (std::uint32_t i = 0; i < v.size(); ++i)
    v[i].id = static_cast<std::uint16_t>((first + i) & 255);
  return v;
}

TEST(RxSlotRule, ResponsesAtTheirRequestsSlotsPassAcrossTheRingWrap) {
  auto v =
      with_slot_ids({data(4096, RxFlag::more_data), data(4096, RxFlag::more_data), data(100)}, 254);
  const RxParse p = parse_rx_packet(v);
  ASSERT_EQ(p.drop, RxDrop::none);
  EXPECT_TRUE(rx_responses_in_slot(v, p, 254, 256));
}

TEST(RxSlotRule, TheExtrasIdsAreNotLookedAtButTheDataSlotsAfterThemAre) {
  // Slot 0, a GSO extra (its bytes overlay the id), then two data slots.
  auto v = with_slot_ids({data(4096, RxFlag::more_data | RxFlag::extra_info),
                          extra(XEN_NETIF_EXTRA_TYPE_GSO), data(4096, RxFlag::more_data), data(10)},
                         7);
  v[1] = extra(XEN_NETIF_EXTRA_TYPE_GSO);  // whatever id its layout implies
  const RxParse p = parse_rx_packet(v);
  ASSERT_EQ(p.drop, RxDrop::none);
  EXPECT_TRUE(rx_responses_in_slot(v, p, 7, 256));
  v[3].id = 3;  // the last data slot names another request
  EXPECT_FALSE(rx_responses_in_slot(v, p, 7, 256));
}

TEST(RxSlotRule, AFirstSlotNamingAnotherRequestFails) {
  auto v = with_slot_ids({data(60)}, 40);
  v[0].id = 41;
  EXPECT_FALSE(rx_responses_in_slot(v, parse_rx_packet(v), 40, 256));
}

TEST(RxGsoFlagRule, GsoPacketsNeedBothChecksumFlagsOthersNeither) {
  auto gso = [](RxFlags f) {
    std::vector<wire::RxResponse> v{data(1000, f | RxFlag::extra_info),
                                    extra(XEN_NETIF_EXTRA_TYPE_GSO)};
    return parse_rx_packet(v);
  };
  EXPECT_TRUE(rx_gso_flags_ok(gso(RxFlag::csum_blank | RxFlag::data_validated)));
  EXPECT_FALSE(rx_gso_flags_ok(gso(RxFlag::csum_blank)));
  EXPECT_FALSE(rx_gso_flags_ok(gso(RxFlag::data_validated)));
  EXPECT_FALSE(rx_gso_flags_ok(gso({})));
  std::vector<wire::RxResponse> plain{data(60)};
  EXPECT_TRUE(rx_gso_flags_ok(parse_rx_packet(plain)));
  EXPECT_STREQ(rx_drop_name(RxDrop::out_of_slot), "out_of_slot");
}

}  // namespace
}  // namespace unetback::netfront
