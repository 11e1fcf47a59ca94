// Shared rings: the layout and notify rules of xen/io/ring.h, index wrap-around, a hostile
// peer, and a two-thread stress test with real "sleep until notified" waits.
#include <atomic>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <thread>
#include <vector>

#include "common/ring/shared_ring.hpp"

// ring.h's macros expect the includer to supply barriers (its defaults call the kernel's
// mb()); used only to prove that our rings interoperate with code written against the C
// header (Linux netfront/netback).
#undef xen_mb
#undef xen_rmb
#undef xen_wmb
#define xen_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define xen_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define xen_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)

namespace unetback::ring {
namespace {

using wire::RxRequest;
using wire::RxResponse;
using wire::TxRequest;
using wire::TxResponse;

struct alignas(4096) Page {
  std::byte bytes[4096];
};

TxRequest tx_req(std::uint32_t seq) {
  TxRequest r{};
  r.gref = seq;
  r.offset = static_cast<std::uint16_t>(seq % 4096);
  r.flags = 0;
  r.id = static_cast<std::uint16_t>(seq & 0xFFFF);
  r.size = static_cast<std::uint16_t>(60 + seq % 1400);
  return r;
}

TEST(SharedRing, NetifRingsHold256Entries) {
  EXPECT_EQ(TxFrontRing::size(), 256u);
  EXPECT_EQ(RxFrontRing::size(), 256u);
  EXPECT_EQ(TxBackRing::size(), 256u);
  EXPECT_EQ(RxBackRing::size(), 256u);
}

TEST(SharedRing, InitWritesTheSameHeaderAsSharedRingInit) {
  Page ours{}, theirs{};
  std::memset(ours.bytes, 0xAB, sizeof ours.bytes);
  std::memset(theirs.bytes, 0xAB, sizeof theirs.bytes);
  (void)TxFrontRing::init(ours.bytes);
  auto* s = reinterpret_cast<netif_tx_sring*>(theirs.bytes);
  SHARED_RING_INIT(s);
  EXPECT_EQ(0, std::memcmp(ours.bytes, theirs.bytes, kRingHeaderSize));
}

TEST(SharedRing, RequestsPushedByUsAreReadByRingHMacros) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes);
  for (std::uint32_t i = 0; i < 10; ++i) front.put_request(tx_req(i));
  EXPECT_TRUE(front.push_requests());  // req_event starts at 1: the first push notifies

  netif_tx_back_ring_t c_back{};
  BACK_RING_INIT(&c_back, reinterpret_cast<netif_tx_sring*>(page.bytes), 4096);
  ASSERT_EQ(RING_SIZE(&c_back), 256u);
  std::uint32_t seen = 0;
  while (RING_HAS_UNCONSUMED_REQUESTS(&c_back)) {
    netif_tx_request_t req;
    RING_COPY_REQUEST(&c_back, c_back.req_cons, &req);
    ++c_back.req_cons;
    EXPECT_EQ(req.gref, seen);
    netif_tx_response_t* rsp = RING_GET_RESPONSE(&c_back, c_back.rsp_prod_pvt);
    rsp->id = req.id;
    rsp->status = NETIF_RSP_OKAY;
    ++c_back.rsp_prod_pvt;
    ++seen;
  }
  EXPECT_EQ(seen, 10u);
  int notify = 0;
  RING_PUSH_RESPONSES_AND_CHECK_NOTIFY(&c_back, notify);
  EXPECT_TRUE(notify);  // rsp_event starts at 1
  ASSERT_EQ(front.unconsumed_responses(), 10u);
  for (std::uint32_t i = 0; i < 10; ++i) EXPECT_EQ(front.take_response().id, i);
}

TEST(SharedRing, RequestsPushedByRingHMacrosAreReadByUs) {
  Page page{};
  auto* s = reinterpret_cast<netif_rx_sring*>(page.bytes);
  SHARED_RING_INIT(s);
  netif_rx_front_ring_t c_front{};
  FRONT_RING_INIT(&c_front, s, 4096);
  for (std::uint16_t i = 0; i < 5; ++i) {
    netif_rx_request_t* req = RING_GET_REQUEST(&c_front, c_front.req_prod_pvt);
    req->id = i;
    req->gref = 100u + i;
    ++c_front.req_prod_pvt;
  }
  int notify = 0;
  RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&c_front, notify);
  EXPECT_TRUE(notify);

  auto back = RxBackRing::attach(page.bytes);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->unconsumed_requests(), 5u);
  for (std::uint16_t i = 0; i < 5; ++i) {
    const RxRequest r = back->take_request();
    EXPECT_EQ(r.id, i);
    EXPECT_EQ(r.gref, 100u + i);
    back->put_response(RxResponse{r.id, 0, 0, 1500});
  }
  EXPECT_TRUE(back->push_responses());
  EXPECT_EQ(RING_HAS_UNCONSUMED_RESPONSES(&c_front), 5u);
  EXPECT_EQ(RING_GET_RESPONSE(&c_front, c_front.rsp_cons)->status, 1500);
}

// need_notify(old, new, event): the peer wants an event once the producer passes `event`.
struct NotifyCase {
  std::uint32_t old_prod, new_prod, event;
  bool expected;
};

class NotifyDecision : public ::testing::TestWithParam<NotifyCase> {};

TEST_P(NotifyDecision, MatchesRingHRule) {
  const auto& c = GetParam();
  EXPECT_EQ(need_notify(c.old_prod, c.new_prod, c.event), c.expected)
      << "old=" << c.old_prod << " new=" << c.new_prod << " event=" << c.event;
}

INSTANTIATE_TEST_SUITE_P(
    HandComputed, NotifyDecision,
    ::testing::Values(
        NotifyCase{0, 1, 1, true},     // first request after init (event = 1)
        NotifyCase{0, 1, 2, false},    // peer wants to hear only after the 2nd
        NotifyCase{5, 10, 6, true},    // event inside (old, new]
        NotifyCase{5, 10, 10, true},   // event == new
        NotifyCase{5, 10, 5, false},   // event == old: it was already due at the last push
        NotifyCase{5, 10, 11, false},  // not yet
        NotifyCase{5, 10, 3, false},   // event behind old: peer is still busy, no event
        NotifyCase{5, 5, 5, false},    // nothing pushed
        NotifyCase{0xFFFFFFFE, 2, 0xFFFFFFFF, true},  // across 2^32
        NotifyCase{0xFFFFFFFE, 2, 0, true}, NotifyCase{0xFFFFFFFE, 2, 2, true},
        NotifyCase{0xFFFFFFFE, 2, 3, false}, NotifyCase{0xFFFFFFFE, 2, 0xFFFFFFFE, false}));

TEST(SharedRing, BackendFinalCheckArmsReqEventSoTheNextPushNotifies) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes);
  auto back = *TxBackRing::attach(page.bytes);
  front.put_request(tx_req(0));
  EXPECT_TRUE(front.push_requests());
  front.put_request(tx_req(1));
  EXPECT_FALSE(front.push_requests());  // backend has not asked again yet
  EXPECT_TRUE(back.final_check_for_requests());
  (void)back.take_request();
  (void)back.take_request();
  EXPECT_FALSE(back.final_check_for_requests());  // empty: arms req_event = req_cons + 1
  front.put_request(tx_req(2));
  EXPECT_TRUE(front.push_requests());
  front.put_request(tx_req(3));
  EXPECT_FALSE(front.push_requests());
}

TEST(SharedRing, FrontendFinalCheckArmsRspEventSoTheNextPushNotifies) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes);
  auto back = *TxBackRing::attach(page.bytes);
  for (std::uint32_t i = 0; i < 3; ++i) front.put_request(tx_req(i));
  (void)front.push_requests();
  for (std::uint32_t i = 0; i < 3; ++i) {
    (void)back.take_request();
    back.put_response(TxResponse{static_cast<std::uint16_t>(i), 0});
  }
  EXPECT_TRUE(back.push_responses());  // rsp_event = 1 at init
  EXPECT_TRUE(front.final_check_for_responses());
  for (int i = 0; i < 3; ++i) (void)front.take_response();
  EXPECT_FALSE(front.final_check_for_responses());  // arms rsp_event = rsp_cons + 1
  back.put_response(TxResponse{9, 0});
  EXPECT_TRUE(back.push_responses());
}

TEST(SharedRing, RxWaitForSlotsArmsReqEventAtProdPlusOne) {
  Page page{};
  auto front = RxFrontRing::init(page.bytes);
  auto back = *RxBackRing::attach(page.bytes);
  for (std::uint16_t i = 0; i < 10; ++i) front.put_request(RxRequest{i, 0, i});
  (void)front.push_requests();
  EXPECT_TRUE(back.requests_available(10));
  EXPECT_FALSE(back.requests_available(18));  // a 64 KiB GSO packet needs 18 slots
  EXPECT_EQ(back.indices().req_event, 11u);
  front.put_request(RxRequest{10, 0, 10});
  EXPECT_TRUE(front.push_requests());  // the backend asked for a kick on the next request
}

TEST(SharedRing, IndicesWrapAroundAt2To32) {
  Page page{};
  const RingIdx start{0xFFFFFF00u};
  auto front = TxFrontRing::init(page.bytes, start);
  auto back = *TxBackRing::attach(page.bytes);
  ASSERT_EQ(back.req_cons(), start);
  std::uint32_t next_req = 0, next_rsp = 0;
  // 4 full rings' worth: the indices cross 2^32 while requests are outstanding.
  for (int round = 0; round < 4 * 256 / 64; ++round) {
    for (int i = 0; i < 64; ++i) front.put_request(tx_req(next_req++));
    (void)front.push_requests();
    ASSERT_EQ(back.unconsumed_requests(), 64u);
    ASSERT_FALSE(back.request_prod_overflow());
    for (int i = 0; i < 64; ++i) {
      const TxRequest r = back.take_request();
      ASSERT_EQ(r.gref, next_rsp);
      back.put_response(TxResponse{r.id, 0});
      ++next_rsp;
    }
    (void)back.push_responses();
    ASSERT_EQ(front.unconsumed_responses(), 64u);
    ASSERT_FALSE(front.response_prod_overflow());
    for (int i = 0; i < 64; ++i) (void)front.take_response();
    ASSERT_EQ(front.free_requests(), 256u);
  }
  EXPECT_LT(back.req_cons().value(), start.value());  // it did wrap
  EXPECT_EQ(back.req_cons(), start + 1024);
}

TEST(SharedRing, FrontRingStopsAtRingSize) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes, RingIdx{0xFFFFFFF0u});
  for (std::uint32_t i = 0; i < 256; ++i) {
    ASSERT_FALSE(front.full());
    front.put_request(tx_req(i));
  }
  EXPECT_TRUE(front.full());
  EXPECT_EQ(front.free_requests(), 0u);
}

// A hostile frontend writes req_prod directly: whatever it claims, the backend never looks
// at more than the ring size (minus responses it still owes) and flags the overflow.
class HostileReqProd : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(HostileReqProd, BackendNeverReadsMoreThanTheRing) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes, RingIdx{0x7FFFFFF0u});
  for (std::uint32_t i = 0; i < 10; ++i) front.put_request(tx_req(i));
  (void)front.push_requests();
  auto back = *TxBackRing::attach(page.bytes);
  // Consume 4 without answering: they are owed responses.
  for (int i = 0; i < 4; ++i) (void)back.take_request();

  auto* hdr = reinterpret_cast<SharedRingHeader*>(page.bytes);
  hdr->req_prod = back.req_cons().value() + GetParam();

  std::uint32_t read = 0;
  while (back.unconsumed_requests() > 0 && read < 100000) {
    (void)back.take_request();
    ++read;
  }
  EXPECT_LE(read, 256u - 4u);
  const std::uint32_t claimed = hdr->req_prod - back.rsp_prod_pvt().value();
  EXPECT_EQ(back.request_prod_overflow(), claimed > 256u);
}

INSTANTIATE_TEST_SUITE_P(FarAheadAndBehind, HostileReqProd,
                         ::testing::Values(0u, 1u, 252u, 253u, 256u, 257u, 1000u, 0x7FFFFFFFu,
                                           0x80000000u, 0xFFFFFFFFu /* one behind */,
                                           0xFFFFFF00u /* far behind */));

TEST(SharedRing, AttachRefusesImpossibleOutstandingRequests) {
  Page page{};
  auto* hdr = reinterpret_cast<SharedRingHeader*>(page.bytes);
  hdr->rsp_prod = 100;
  hdr->req_prod = 100 + 256;
  EXPECT_TRUE(TxBackRing::attach(page.bytes).has_value());
  hdr->req_prod = 100 + 257;
  auto r = TxBackRing::attach(page.bytes);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), std::errc::io_error);
  hdr->req_prod = 99;  // behind: 2^32 - 1 outstanding
  EXPECT_FALSE(TxBackRing::attach(page.bytes).has_value());
}

TEST(SharedRing, HostileBackendResponseOverflowIsDetected) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes);
  front.put_request(tx_req(0));
  (void)front.push_requests();
  auto* hdr = reinterpret_cast<SharedRingHeader*>(page.bytes);
  hdr->rsp_prod = 257;
  EXPECT_TRUE(front.response_prod_overflow());
  hdr->rsp_prod = 1;
  EXPECT_FALSE(front.response_prod_overflow());
}

TEST(SharedRing, RequestIsCopiedOnceSoLaterWritesDoNotChangeIt) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes);
  front.put_request(tx_req(7));
  (void)front.push_requests();
  auto back = *TxBackRing::attach(page.bytes);
  const TxRequest copy = back.copy_request_at(back.req_cons());
  // The guest rewrites the slot after we copied it (the XSA-155 double-fetch attack).
  auto* slot0 = reinterpret_cast<TxRequest*>(page.bytes + kRingHeaderSize);
  slot0->size = 0xFFFF;
  slot0->offset = 4095;
  EXPECT_EQ(copy.size, tx_req(7).size);
  EXPECT_EQ(copy.offset, tx_req(7).offset);
}

TEST(SharedRing, ExtraInfoTravelsInARequestSlot) {
  Page page{};
  auto front = TxFrontRing::init(page.bytes);
  TxRequest first = tx_req(1);
  first.flags = NETTXF_extra_info;
  wire::ExtraInfo gso{};
  gso.type = XEN_NETIF_EXTRA_TYPE_GSO;
  gso.u.gso.size = 1448;
  gso.u.gso.type = XEN_NETIF_GSO_TYPE_TCPV6;
  front.put_request(first);
  front.put_request_as(gso);
  (void)front.push_requests();
  auto back = *TxBackRing::attach(page.bytes);
  ASSERT_EQ(back.unconsumed_requests(), 2u);
  EXPECT_EQ(back.take_request().flags, NETTXF_extra_info);
  const auto e = back.take_request_as<wire::ExtraInfo>();
  EXPECT_EQ(e.type, XEN_NETIF_EXTRA_TYPE_GSO);
  EXPECT_EQ(e.u.gso.size, 1448);
  EXPECT_EQ(e.u.gso.type, XEN_NETIF_GSO_TYPE_TCPV6);
}

// Front and back on one page in two threads. Each side sleeps (atomic wait) only after its
// final check found nothing, and is woken only when the other side's push said "notify":
// a wrong notify rule or a missing fence shows up as a hang (caught by the test timeout).
// Every request carries a sequence number: order, loss and duplicates are all checked.
TEST(SharedRingStress, TenMillionRequestResponsePairsAcrossTwoThreads) {
  constexpr std::uint32_t kPairs = 10'000'000;
  Page page{};
  auto front = TxFrontRing::init(page.bytes, RingIdx{0xFFFF0000u});  // wraps early on
  auto back = *TxBackRing::attach(page.bytes);

  std::atomic<std::uint32_t> to_back{0}, to_front{0};  // "event channels": kick counters
  std::atomic<bool> back_failed{false};
  std::uint64_t notifications_sent = 0;

  std::thread backend([&] {
    std::uint32_t expected = 0;
    std::uint64_t kicks = 0;
    while (expected < kPairs) {
      std::uint32_t seen_kick = to_back.load(std::memory_order_acquire);
      if (!back.final_check_for_requests()) {
        to_back.wait(seen_kick, std::memory_order_acquire);
        continue;
      }
      std::uint32_t n = back.unconsumed_requests();
      while (n-- > 0) {
        const TxRequest r = back.take_request();
        if (r.gref != expected || r.id != (expected & 0xFFFF)) {
          back_failed = true;
          expected = kPairs;
          break;
        }
        back.put_response(TxResponse{r.id, static_cast<std::int16_t>(r.gref & 0x7FFF)});
        ++expected;
      }
      if (back.push_responses()) {
        to_front.fetch_add(1, std::memory_order_release);
        to_front.notify_one();
        ++kicks;
      }
    }
    (void)kicks;
  });

  std::uint32_t sent = 0, received = 0;
  while (received < kPairs && !back_failed) {
    while (sent < kPairs && !front.full() && sent - received < 256) {
      front.put_request(tx_req(sent++));
    }
    if (front.push_requests()) {
      to_back.fetch_add(1, std::memory_order_release);
      to_back.notify_one();
      ++notifications_sent;
    }
    std::uint32_t seen_kick = to_front.load(std::memory_order_acquire);
    if (!front.final_check_for_responses()) {
      if (sent == received) continue;
      to_front.wait(seen_kick, std::memory_order_acquire);
      continue;
    }
    ASSERT_FALSE(front.response_prod_overflow());
    std::uint32_t n = front.unconsumed_responses();
    while (n-- > 0) {
      const TxResponse r = front.take_response();
      ASSERT_EQ(r.id, received & 0xFFFF) << "response out of order at " << received;
      ASSERT_EQ(r.status, static_cast<std::int16_t>(received & 0x7FFF));
      ++received;
    }
  }
  backend.join();
  ASSERT_FALSE(back_failed) << "backend saw a request out of order, lost or duplicated";
  EXPECT_EQ(received, kPairs);
  EXPECT_EQ(back.req_cons(), RingIdx{0xFFFF0000u} + kPairs);
  // Event suppression works: far fewer kicks than requests.
  EXPECT_LT(notifications_sent, kPairs);
  std::printf("stress: %u pairs, %llu frontend->backend notifications (%.3f per request)\n", kPairs,
              static_cast<unsigned long long>(notifications_sent),
              static_cast<double>(notifications_sent) / kPairs);
}

}  // namespace
}  // namespace unetback::ring
