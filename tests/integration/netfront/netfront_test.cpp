// Netfront end to end through xensim: the frontend (a domU SimHypervisor) and a minimal
// backend (dom0, tests/integration/netfront/test_backend) in one process.
#include "frontend-shim/netfront.hpp"

#include <functional>
#include <gtest/gtest.h>
#include <memory>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>

#include "common/hv/sim/sim_grant_sharer.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "common/net/frame_builder.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/util/unique_fd.hpp"
#include "frontend-shim/ctrl_runner.hpp"
#include "frontend-shim/tap_rx_writer.hpp"
#include "frontend-shim/tx_frag_layout.hpp"
#include "tests/integration/netfront/netfront_world.hpp"
#include "tests/integration/netfront/test_backend.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/figure.hpp"

namespace unetback::test {
namespace {

using namespace std::chrono_literals;

// How long a wait for something that must happen may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr auto kHangGuard = 30s;
using netfront::Netfront;
using netfront::NetfrontOptions;
using netfront::RxDrop;
using netfront::RxGso;
using netfront::RxPacket;
using netfront::TxMeta;

std::vector<std::byte> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::byte(static_cast<std::uint8_t>(seed + i * 7 + (i >> 8)));
  return v;
}

class NetfrontWorld : public NetfrontWorldTest {
 protected:
  /// Advertises, connects a Netfront with `opts` and attaches the backend to queue 0.
  void connect(NetfrontOptions opts = {}, BackendAdvert advert = {}) {
    backend_->advertise(advert);
    nf_ = std::make_unique<Netfront>(*domu_, opts);
    ASSERT_FALSE(nf_->connect(kHangGuard));
    ASSERT_TRUE(backend_->attach(0));
  }
};

// --- connect ---

TEST_F(NetfrontWorld, ConnectWritesLinuxNetfrontKeysAndGoesStraightToConnected) {
  // Watch the frontend's state: when it turns 4, every other key must already be there
  // (they are written in the same transaction).
  auto xs = dom0_->open_xenstore();
  ASSERT_FALSE(xs->watch(backend_->fe_dir() + "/state", "t"));
  BackendAdvert a;
  a.max_queues = 4;
  connect({}, a);
  const auto keys = backend_->frontend_keys();
  const std::set<std::string> want{"backend",
                                   "backend-id",
                                   "state",
                                   "tx-ring-ref",
                                   "rx-ring-ref",
                                   "event-channel-tx",
                                   "event-channel-rx",
                                   "request-rx-copy",
                                   "feature-rx-notify",
                                   "feature-sg",
                                   "feature-gso-tcpv4",
                                   "feature-gso-tcpv6",
                                   "feature-ipv6-csum-offload",
                                   "multi-queue-num-queues"};
  std::set<std::string> got;
  for (const auto& [k, v] : keys) got.insert(k);
  EXPECT_EQ(got, want);
  EXPECT_EQ(keys.at("state"), "4");
  EXPECT_EQ(keys.at("request-rx-copy"), "1");
  EXPECT_EQ(keys.at("feature-rx-notify"), "1");
  EXPECT_EQ(keys.at("multi-queue-num-queues"), "1");
  // The state went 1 -> 4 directly: no watch event ever showed 3 (Initialised).
  std::set<std::string> seen_states;
  while (auto ev = xs->read_watch())
    if (auto v = xs->read(backend_->fe_dir() + "/state")) seen_states.insert(*v);
  EXPECT_EQ(seen_states.count("3"), 0U);
  // A full ring of RX buffers was posted before connecting, one page each, id = index.
  EXPECT_EQ(backend_->rx_req_prod(), RingIdx{256});
  EXPECT_EQ(backend_->rx_available(), 256U);
  EXPECT_TRUE(nf_->split_event_channels());
}

// With no backend in InitWait, connect gives up at its bound (not before it, and not never);
// a backend that comes while it waits is taken. The advertiser's pause only makes it likely
// that the backend comes while connect waits rather than before: either order connects.
TEST_F(NetfrontWorld, ConnectWaitsForInitWaitWithABound) {
  nf_ = std::make_unique<Netfront>(*domu_, NetfrontOptions{});
  constexpr auto kBound = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(nf_->connect(kBound), std::errc::timed_out);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, kBound) << "gave up before its bound";
  EXPECT_LT(waited, kBound + kHangGuard) << "did not give up at its bound";
  EXPECT_EQ(backend_->frontend_state(), 1);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    backend_->advertise({});
  });
  EXPECT_FALSE(nf_->connect(kHangGuard));
  later.join();
  EXPECT_EQ(backend_->frontend_state(), 4);
}

TEST_F(NetfrontWorld, RefusesABackendWithoutRxCopy) {
  BackendAdvert a;
  a.rx_copy = false;
  backend_->advertise(a);
  nf_ = std::make_unique<Netfront>(*domu_, NetfrontOptions{});
  EXPECT_EQ(nf_->connect(kHangGuard), std::errc::no_such_device);
  EXPECT_FALSE(nf_->connected());
  EXPECT_EQ(backend_->frontend_state(), 1);
}

TEST_F(NetfrontWorld, QueuesAreCappedByTheBackendMaximum) {
  NetfrontOptions o;
  o.queues = 4;
  BackendAdvert a;
  a.max_queues = 2;
  a.split = false;
  backend_->advertise(a);
  nf_ = std::make_unique<Netfront>(*domu_, o);
  ASSERT_FALSE(nf_->connect(kHangGuard));
  EXPECT_EQ(nf_->num_queues(), 2U);
  const auto keys = backend_->frontend_keys();
  EXPECT_EQ(keys.at("multi-queue-num-queues"), "2");
  for (const char* k : {"queue-0/tx-ring-ref", "queue-0/rx-ring-ref", "queue-0/event-channel",
                        "queue-1/tx-ring-ref", "queue-1/rx-ring-ref", "queue-1/event-channel"})
    EXPECT_EQ(keys.count(k), 1U) << k;
  EXPECT_EQ(keys.count("tx-ring-ref"), 0U);
  EXPECT_EQ(keys.count("queue-0/event-channel-tx"), 0U);
  EXPECT_TRUE(backend_->attach(1));
}

TEST_F(NetfrontWorld, WithoutAMaxQueuesKeyOneQueueAndNoNumQueuesKey) {
  NetfrontOptions o;
  o.queues = 4;
  connect(o);
  EXPECT_EQ(nf_->num_queues(), 1U);
  EXPECT_EQ(backend_->frontend_keys().count("multi-queue-num-queues"), 0U);
}

// --- TX ---

TEST_F(NetfrontWorld, TxFramesArriveIntactSplitLikeLinux) {
  NetfrontOptions o;
  o.tx_headroom = 66;  // NET_SKB_PAD + NET_IP_ALIGN
  connect(o);
  struct Case {
    std::size_t len;
    std::optional<RxGso> gso;
    std::uint32_t slots;
    bool zerocopy;
  };
  const Case cases[] = {{60, {}, 1, false},  // below goodcopy_len: copied
                        {1514, {}, 1, true},
                        {9000, RxGso{wire::GsoType::tcpv4, 8948}, 3, true},
                        {65000, RxGso{wire::GsoType::tcpv6, 1428}, 16, true}};
  std::uint8_t seed = 1;
  for (const Case& c : cases) {
    const auto frame = pattern(c.len, seed++);
    TxMeta meta;
    meta.gso = c.gso;
    meta.csum_blank = c.gso.has_value();
    auto sent = nf_->send(frame, meta);
    ASSERT_TRUE(sent) << c.len << ": " << sent.error().message();
    EXPECT_EQ(sent->slots, c.slots) << c.len;
    EXPECT_EQ(sent->zerocopy, c.zerocopy) << c.len;
    auto got = backend_->receive_tx();
    ASSERT_TRUE(got) << c.len;
    EXPECT_TRUE(got->copy_ok);
    EXPECT_EQ(got->bytes, frame) << c.len;
    ASSERT_EQ(got->requests.size(), c.slots);
    EXPECT_EQ(got->requests[0].size, c.len);  // the first request carries the total
    // Linux layout: zerocopy frames start at the headroom and fill to the page end.
    if (c.zerocopy) {
      EXPECT_EQ(got->requests[0].offset, 66);
    }
    for (std::size_t i = 1; i < got->requests.size(); ++i)
      EXPECT_LE(got->requests[i].offset + got->requests[i].size, 4096);
    ASSERT_EQ(got->extra.has_value(), c.gso.has_value());
    if (c.gso) {
      EXPECT_EQ(got->extra->type, XEN_NETIF_EXTRA_TYPE_GSO);
      EXPECT_EQ(got->extra->u.gso.size, c.gso->size);
      EXPECT_EQ(got->extra->u.gso.type, static_cast<std::uint8_t>(c.gso->type));
      EXPECT_TRUE(wire::tx_flags(got->requests[0]).has(wire::TxFlag::csum_blank));
    }
  }
  nf_->process_tx_responses();
  const auto s = nf_->stats();
  EXPECT_EQ(s.tx_packets, 4U);
  EXPECT_EQ(s.tx_completed, 4U);
  EXPECT_EQ(s.tx_zerocopy, 3U);
  EXPECT_EQ(s.tx_copy, 1U);
  EXPECT_EQ(s.tx_slots, 21U);
  EXPECT_EQ(s.tx_bad_response_id, 0U);
  EXPECT_EQ(nf_->queue(QueueId{0})->limiter_stats().zerocopy_success, 3U);
  EXPECT_EQ(nf_->queue(QueueId{0})->tx_free_slots(), 256U);
}

TEST_F(NetfrontWorld, TxWithoutSgSendsOneSlotAndRefusesJumboFrames) {
  BackendAdvert a;
  a.sg = false;
  connect({}, a);
  const auto frame = pattern(1514, 3);
  auto sent = nf_->send(frame);
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->slots, 1U);
  EXPECT_EQ(nf_->send(pattern(9000, 1)).error(), std::errc::message_size);
  // GSO needs SG (Linux drops TSO without it).
  TxMeta meta;
  meta.gso = RxGso{wire::GsoType::tcpv4, 1448};
  EXPECT_EQ(nf_->send(frame, meta).error(), std::errc::not_supported);
  auto got = backend_->receive_tx();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, frame);
}

TEST_F(NetfrontWorld, TxBufferIsSentFromItsOwnGrantedPages) {
  NetfrontOptions o;
  o.tx_headroom = 128;
  connect(o);
  const auto frame = pattern(6000, 9);
  auto buf = nf_->alloc_tx_buffer(frame.size());
  ASSERT_TRUE(buf);
  ASSERT_EQ(buf->segment_count(), 2U);
  EXPECT_EQ(buf->segment(0).size(), 4096U - 128);
  ASSERT_TRUE(buf->write(0, frame));
  auto sent = nf_->send(std::move(*buf));
  ASSERT_TRUE(sent);
  EXPECT_TRUE(sent->zerocopy);
  auto got = backend_->receive_tx();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, frame);
  EXPECT_EQ(got->requests[0].offset, 128);
}

// The shim reads each TAP frame into a buffer of the largest size, then shrinks it to what
// the read returned: the pages a short frame does not need go back to the pool at once.
TEST_F(NetfrontWorld, TxBufferShrunkToAShortFrameGivesBackThePagesItDoesNotNeed) {
  NetfrontOptions o;
  o.tx_headroom = 128;
  o.tx_buffer_pages = 40;
  connect(o);
  auto a = nf_->alloc_tx_buffer(wire::kMaxTxSize);
  auto b = nf_->alloc_tx_buffer(wire::kMaxTxSize);
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  ASSERT_EQ(a->segment_count(), 17U);  // 3968 bytes in the first page, then 15 and a bit
  // 34 of 40 pages taken: no room for a third frame of that size.
  EXPECT_EQ(nf_->alloc_tx_buffer(wire::kMaxTxSize).error(),
            std::errc::resource_unavailable_try_again);
  EXPECT_EQ(a->shrink(wire::kMaxTxSize + 1), std::errc::invalid_argument);
  EXPECT_EQ(a->shrink(10), std::errc::invalid_argument);  // shorter than an Ethernet header
  ASSERT_FALSE(a->shrink(5000));
  EXPECT_EQ(a->size(), 5000U);
  ASSERT_EQ(a->segment_count(), 2U);
  EXPECT_EQ(a->segment(0).size(), 4096U - 128);
  EXPECT_EQ(a->segment(1).size(), 5000U - (4096 - 128));
  auto c = nf_->alloc_tx_buffer(wire::kMaxTxSize);  // the 15 pages came back
  ASSERT_TRUE(c);
  // The shrunk buffer still sends what it holds, from its own pages.
  const auto frame = pattern(5000, 4);
  ASSERT_TRUE(a->write(0, frame));
  auto sent = nf_->send(std::move(*a));
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->slots, 2U);
  auto got = backend_->receive_tx();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, frame);
}

TEST_F(NetfrontWorld, TxPageTheBackendStillMapsIsNotReused) {
  connect();
  for (std::size_t len : {std::size_t{60}, std::size_t{1514}}) {  // a copy page, then a pool page
    ASSERT_TRUE(nf_->send(pattern(len, 1)));
    auto held = backend_->receive_tx(/*hold_map=*/true);
    ASSERT_TRUE(held);
    const GrantRef ref{held->requests[0].gref};
    nf_->process_tx_responses();
    EXPECT_EQ(nf_->queue(QueueId{0})->tx_held_pages(), 1U) << len;
    // While it is mapped, no new request names that grant.
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(nf_->send(pattern(len, static_cast<std::uint8_t>(i))));
      auto got = backend_->receive_tx();
      ASSERT_TRUE(got);
      for (const auto& r : got->requests) EXPECT_NE(GrantRef{r.gref}, ref) << len << " " << i;
      nf_->process_tx_responses();
    }
    EXPECT_EQ(nf_->queue(QueueId{0})->tx_held_pages(), 1U);
    backend_->release_held();
    nf_->process_tx_responses();
    EXPECT_EQ(nf_->queue(QueueId{0})->tx_held_pages(), 0U) << len;
  }
  EXPECT_EQ(nf_->stats().tx_pages_held, 2U);
}

TEST_F(NetfrontWorld, TxIsBusyBelowNineteenFreeSlots) {
  connect();
  const auto frame = pattern(1514, 5);
  std::uint32_t sent = 0;
  while (nf_->send(frame)) ++sent;
  EXPECT_EQ(sent, 256U - 18U);  // stops when fewer than 19 slots are free
  EXPECT_EQ(nf_->send(frame).error(), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(nf_->stats().tx_busy, 2U);
  // The zerocopy limit (min(128, 256/4) = 64) was reached and the rest copied, never stalled.
  EXPECT_EQ(nf_->stats().tx_zerocopy, 64U);
  EXPECT_EQ(nf_->stats().tx_copy, sent - 64U);
  while (backend_->receive_tx()) {
  }
  nf_->process_tx_responses();
  EXPECT_TRUE(nf_->send(frame));
  EXPECT_EQ(nf_->stats().tx_completed, sent);
}

TEST_F(NetfrontWorld, RawLayoutsReachTheBackendAsGiven) {
  connect();
  // A 10-byte first slot, a zero-size slot, then page frags; and a 20-slot chain.
  const netfront::RawTxSlot layout[] = {{100, 10}, {0, 0}, {0, 4096}, {200, 300}};
  const auto data = pattern(10 + 4096 + 300, 4);
  ASSERT_TRUE(nf_->send_raw(layout, data));
  auto got = backend_->receive_tx();
  ASSERT_TRUE(got);
  ASSERT_EQ(got->requests.size(), 4U);
  EXPECT_EQ(got->requests[0].size, data.size());
  EXPECT_EQ(got->requests[0].offset, 100);
  EXPECT_EQ(got->requests[1].size, 0);
  EXPECT_EQ(got->requests[3].offset, 200);
  EXPECT_EQ(got->bytes, data);

  std::vector<netfront::RawTxSlot> twenty(20, {0, 100});
  ASSERT_TRUE(nf_->send_raw(twenty, pattern(2000, 1)));
  got = backend_->receive_tx();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->requests.size(), 20U);
  nf_->process_tx_responses();
  EXPECT_EQ(nf_->stats().tx_completed, 2U);
}

TEST_F(NetfrontWorld, TxFragChainKeepsItsGsoExtraAndReachesTheBackendAsPlanned) {
  // netfront-shim --tx-frags: a TSO frame as a Linux-like chain (header slot, odd-offset
  // pieces), sent with the frame's own GSO metadata.
  connect();
  net::FrameSpec spec;
  spec.payload_len = 20000;
  spec.checksum = net::L4ChecksumMode::partial;
  const auto frame = net::build_frame(spec);
  auto layout = shim::plan_tx_frags(frame, 4000);
  ASSERT_TRUE(layout);
  TxMeta meta;
  meta.csum_blank = true;
  meta.gso = RxGso{wire::GsoType::tcpv4, 1448};
  ASSERT_TRUE(nf_->send_raw(layout->span(), frame, meta));
  auto got = backend_->receive_tx();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, frame);
  ASSERT_EQ(got->requests.size(), 1U + 5);
  EXPECT_EQ(got->requests[0].size, frame.size());  // the first request carries the total
  EXPECT_EQ(got->requests[0].offset, shim::kTxFragHeaderOffset);
  for (std::size_t i = 1; i < got->requests.size(); ++i) {
    EXPECT_EQ(got->requests[i].offset % 2, 1) << i;
    EXPECT_LE(got->requests[i].offset + got->requests[i].size, wire::kPageSize) << i;
  }
  ASSERT_TRUE(got->extra);
  EXPECT_EQ(got->extra->u.gso.size, 1448);
  EXPECT_EQ(got->extra->u.gso.type, static_cast<std::uint8_t>(wire::GsoType::tcpv4));
  EXPECT_TRUE(wire::tx_flags(got->requests[0]).has(wire::TxFlag::csum_blank));
}

TEST_F(NetfrontWorld, TxResponsesWithIdsNotInFlightAreCountedAndIgnored) {
  connect();
  std::set<std::uint16_t> ids;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(nf_->send(pattern(100, 1)));
    auto got = backend_->receive_tx(false, NETIF_RSP_OKAY, /*respond=*/false);
    ASSERT_TRUE(got);
    ids.insert(got->requests[0].id);
  }
  std::uint16_t stranger = 0;
  while (ids.count(stranger)) ++stranger;
  const std::uint16_t id = *ids.begin();
  // Four responses for four requests, but only one names a request in flight.
  backend_->raw_tx_response(300, NETIF_RSP_OKAY);       // out of range
  backend_->raw_tx_response(stranger, NETIF_RSP_OKAY);  // never sent
  backend_->raw_tx_response(id, NETIF_RSP_ERROR);
  backend_->raw_tx_response(id, NETIF_RSP_OKAY);  // answered already
  nf_->process_tx_responses();
  const auto s = nf_->stats();
  EXPECT_EQ(s.tx_bad_response_id, 3U);
  EXPECT_EQ(s.tx_completed, 1U);
  EXPECT_EQ(s.tx_error_responses, 1U);
  EXPECT_EQ(s.broken, 0U);
  EXPECT_TRUE(nf_->send(pattern(100, 1)));
}

TEST_F(NetfrontWorld, MoreTxResponsesThanRequestsBreakTheQueue) {
  connect();
  ASSERT_TRUE(nf_->send(pattern(100, 1)));
  auto got = backend_->receive_tx(false, NETIF_RSP_OKAY, /*respond=*/false);
  ASSERT_TRUE(got);
  backend_->raw_tx_response(got->requests[0].id, NETIF_RSP_OKAY);
  backend_->raw_tx_response(got->requests[0].id, NETIF_RSP_OKAY);
  nf_->process_tx_responses();
  EXPECT_EQ(nf_->stats().broken, 1U);
  EXPECT_EQ(nf_->stats().tx_completed, 0U);  // nothing of a broken batch is trusted
  EXPECT_EQ(nf_->send(pattern(100, 1)).error(), std::errc::io_error);
}

TEST_F(NetfrontWorld, EventFdWakesOnBackendNotifyAndHandleEventCompletesTx) {
  connect();
  ASSERT_TRUE(nf_->send(pattern(1514, 2)));
  ASSERT_TRUE(backend_->receive_tx());  // answers and notifies (rsp_event was armed)
  pollfd pfd{nf_->event_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
  const auto kinds = nf_->handle_event();
  EXPECT_TRUE(kinds.tx);
  EXPECT_FALSE(kinds.rx);
  EXPECT_EQ(nf_->stats().tx_completed, 1U);
  // The backend got our TX kick too.
  EXPECT_GE(backend_->drain_events(), 1U);
}

// --- RX ---

TEST_F(NetfrontWorld, RxMultiSlotPacketsAreReassembled) {
  connect();
  const auto small = pattern(60, 1), jumbo = pattern(9000, 2), gso = pattern(65000, 3);
  ASSERT_TRUE(backend_->deliver_rx(small, {}, wire::RxFlag::data_validated));
  ASSERT_TRUE(backend_->deliver_rx(jumbo));
  ASSERT_TRUE(backend_->deliver_rx(gso, RxGso{wire::GsoType::tcpv4, 1448},
                                   wire::RxFlag::csum_blank | wire::RxFlag::data_validated));
  pollfd pfd{nf_->event_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
  EXPECT_TRUE(nf_->handle_event().rx);
  std::vector<RxPacket> out;
  ASSERT_EQ(nf_->poll(out), 3U);
  EXPECT_EQ(out[0].bytes, small);
  EXPECT_TRUE(out[0].flags.has(wire::RxFlag::data_validated));
  EXPECT_EQ(out[0].slots_used, 1U);
  EXPECT_EQ(out[1].bytes, jumbo);
  EXPECT_EQ(out[1].slots_used, 3U);
  EXPECT_EQ(out[2].bytes, gso);
  EXPECT_EQ(out[2].slots_used, 17U);  // 16 data slots + the GSO extra
  ASSERT_TRUE(out[2].gso);
  EXPECT_EQ(*out[2].gso, (RxGso{wire::GsoType::tcpv4, 1448}));
  EXPECT_TRUE(out[2].flags.has(wire::RxFlag::csum_blank));
  EXPECT_EQ(nf_->stats().rx_bytes, 60U + 9000 + 65000);
}

// The shim's guest RX: each packet goes from its RX pages to the TAP (here a SEQPACKET
// socket, one message per writev) with its virtio_net_hdr, without a copy in between, and a
// poll's packets are written together at its flush.
TEST_F(NetfrontWorld, TapRxWriterWritesEachPacketStraightFromItsPages) {
  connect();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  UniqueFd tap(sv[0]), host(sv[1]);
  const int big = 1 << 20;
  ASSERT_EQ(::setsockopt(tap.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof(big)), 0);
  shim::TapRxWriter writer;
  writer.set_fd(tap.get());

  const auto small = pattern(60, 1);
  net::FrameSpec spec;
  spec.payload_len = 20000;
  spec.checksum = net::L4ChecksumMode::partial;
  const auto tso = net::build_frame(spec);
  // IPv6 behind eight extension headers, TCP with 40 option bytes: 178 bytes of headers.
  spec.ip = net::IpVersion::v6;
  spec.ipv6_ext_headers = {0, 60, 60, 60, 60, 60, 60, 43};
  spec.tcp_options_len = 40;
  const auto tso6 = net::build_frame(spec);
  const auto both = wire::RxFlag::csum_blank | wire::RxFlag::data_validated;
  const RxGso gso{wire::GsoType::tcpv4, 1448};
  ASSERT_TRUE(backend_->deliver_rx(small, {}, wire::RxFlag::data_validated));
  // A SYN-ACK-sized segment with its checksum left to the guest (shorter than the head).
  net::FrameSpec syn;
  syn.checksum = net::L4ChecksumMode::partial;
  syn.tcp_options_len = 20;
  const auto synack = net::build_frame(syn);
  ASSERT_TRUE(backend_->deliver_rx(synack, {}, both));
  ASSERT_TRUE(backend_->deliver_rx(tso, gso, both));
  // A backend that cut the first slot inside the IP header: the head spans two slots.
  ASSERT_TRUE(backend_->deliver_rx(tso, gso, both, 20));
  // Headers longer than the writer's head: the packet is gathered whole first.
  ASSERT_TRUE(backend_->deliver_rx(tso6, RxGso{wire::GsoType::tcpv6, 1400}, both));
  ASSERT_EQ(nf_->poll(writer), 5U);
  EXPECT_EQ(writer.written(), 5U);
  EXPECT_EQ(writer.dropped(), 0U);
  EXPECT_EQ(writer.linearised(), 1U);
  // The poll's five packets in one io_uring_enter (one writev each where io_uring is missing).
  EXPECT_EQ(writer.syscalls(), writer.batched() ? 1U : 5U);

  std::vector<std::byte> msg(net::kVnetHdrLen + 70000);
  auto next = [&] {
    const ssize_t n = ::recv(host.get(), msg.data(), msg.size(), MSG_DONTWAIT);
    EXPECT_GE(n, static_cast<ssize_t>(net::kVnetHdrLen));
    return std::vector<std::byte>(msg.begin(), msg.begin() + std::max<ssize_t>(n, 0));
  };
  auto m = next();
  auto hdr = net::load_vnet_hdr(m);
  ASSERT_TRUE(hdr);
  EXPECT_EQ(hdr->hdr.flags, VIRTIO_NET_HDR_F_DATA_VALID);
  EXPECT_EQ(std::vector<std::byte>(m.begin() + net::kVnetHdrLen, m.end()), small);
  m = next();
  hdr = net::load_vnet_hdr(m);
  ASSERT_TRUE(hdr);
  EXPECT_EQ(hdr->hdr.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
  EXPECT_EQ(hdr->hdr.csum_start, 34);
  EXPECT_EQ(std::vector<std::byte>(m.begin() + net::kVnetHdrLen, m.end()), synack);
  for (int i = 0; i < 2; ++i) {
    m = next();
    hdr = net::load_vnet_hdr(m);
    ASSERT_TRUE(hdr);
    EXPECT_EQ(hdr->hdr.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
    EXPECT_EQ(hdr->hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
    EXPECT_EQ(hdr->hdr.gso_size, 1448);
    EXPECT_EQ(std::vector<std::byte>(m.begin() + net::kVnetHdrLen, m.end()), tso) << i;
  }
  m = next();
  hdr = net::load_vnet_hdr(m);
  ASSERT_TRUE(hdr);
  EXPECT_EQ(hdr->hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV6);
  EXPECT_EQ(hdr->hdr.hdr_len, 178);
  EXPECT_EQ(std::vector<std::byte>(m.begin() + net::kVnetHdrLen, m.end()), tso6);
}

// A sink reads the packets in the RX pages: they are posted to the backend again only after
// the poll's last packet and the sink's flush().
TEST_F(NetfrontWorld, RxPagesArePostedAgainOnlyAfterTheSinkFlushed) {
  NetfrontOptions o;
  o.rx_budget = 64;
  connect(o);
  struct Recorder final : netfront::RxSink {
    TestBackend* be = nullptr;
    std::vector<RingIdx> at_deliver, at_flush;
    void deliver(const netfront::RxView&) override { at_deliver.push_back(be->rx_req_prod()); }
    void flush() override { at_flush.push_back(be->rx_req_prod()); }
  } rec;
  rec.be = backend_.get();
  // 33 packets: past seed 002's threshold (32), so this poll ends with a refill.
  for (int i = 0; i < 33; ++i) ASSERT_TRUE(backend_->deliver_rx(pattern(100, i)));
  ASSERT_EQ(nf_->poll(rec), 33U);
  ASSERT_EQ(rec.at_deliver.size(), 33U);
  for (RingIdx r : rec.at_deliver) EXPECT_EQ(r, RingIdx{256});
  ASSERT_EQ(rec.at_flush.size(), 1U);
  EXPECT_EQ(rec.at_flush[0], RingIdx{256});
  EXPECT_EQ(backend_->rx_req_prod(), RingIdx{256 + 33});
  EXPECT_EQ(nf_->stats().rx_refills, 1U);
}

class RxRefill : public NetfrontWorld, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(RxRefill, HappensOnceFreeExceedsHalfTheBudget) {
  NetfrontOptions o;
  o.rx_budget = GetParam();
  connect(o);
  const std::uint32_t threshold = std::min<std::uint32_t>(GetParam(), 256) / 2;
  const auto frame = pattern(100, 1);
  std::vector<RxPacket> out;
  for (std::uint32_t i = 0; i < threshold; ++i) {
    ASSERT_TRUE(backend_->deliver_rx(frame));
    (void)nf_->poll(out);
  }
  EXPECT_EQ(out.size(), threshold);
  // `threshold` slots free: not more than the threshold, no refill yet.
  EXPECT_EQ(backend_->rx_req_prod(), RingIdx{256});
  EXPECT_EQ(nf_->stats().rx_refills, 0U);
  ASSERT_TRUE(backend_->deliver_rx(frame));
  (void)nf_->poll(out);
  EXPECT_EQ(backend_->rx_req_prod(), RingIdx{256 + threshold + 1});
  EXPECT_EQ(nf_->stats().rx_refills, 1U);
  EXPECT_EQ(backend_->rx_available(), 256U);
}

INSTANTIATE_TEST_SUITE_P(Budgets, RxRefill, ::testing::Values(2U, 16U, 64U, 300U));

TEST_F(NetfrontWorld, RxRefillHalfRingRuleWaitsForHalfTheRing) {
  NetfrontOptions o;
  o.rx_budget = 64;
  o.rx_refill = netfront::RxRefillRule::half_ring;
  connect(o);
  const auto frame = pattern(100, 1);
  std::vector<RxPacket> out;
  // 128 free: seed 002 would have refilled after 33; the old rule waits for more than half.
  for (std::uint32_t i = 0; i < 128; ++i) {
    ASSERT_TRUE(backend_->deliver_rx(frame));
    (void)nf_->poll(out);
  }
  EXPECT_EQ(out.size(), 128U);
  EXPECT_EQ(backend_->rx_req_prod(), RingIdx{256});
  EXPECT_EQ(nf_->stats().rx_refills, 0U);
  ASSERT_TRUE(backend_->deliver_rx(frame));
  (void)nf_->poll(out);
  EXPECT_EQ(backend_->rx_req_prod(), RingIdx{256 + 129});
  EXPECT_EQ(nf_->stats().rx_refills, 1U);
  EXPECT_EQ(backend_->rx_available(), 256U);
}

TEST_F(NetfrontWorld, RxHostileResponsesAreDroppedAndCounted) {
  connect();
  auto rsp = [](std::int16_t status, wire::RxFlags flags = {}, std::uint16_t offset = 0) {
    wire::RxResponse r{};
    r.status = status;
    r.flags = flags.raw();
    r.offset = offset;
    return r;
  };
  ASSERT_TRUE(backend_->deliver_raw_rx({rsp(100, {}, 4000)}));  // crosses the page end
  ASSERT_TRUE(backend_->deliver_raw_rx({rsp(-1)}));
  std::vector<wire::RxResponse> twenty(20, rsp(1000, wire::RxFlag::more_data));
  twenty.back().flags = 0;
  ASSERT_TRUE(backend_->deliver_raw_rx(twenty));
  const auto good = pattern(500, 7);
  ASSERT_TRUE(backend_->deliver_rx(good));
  std::vector<RxPacket> out;
  ASSERT_EQ(nf_->poll(out), 1U);
  EXPECT_EQ(out[0].bytes, good);
  const auto s = nf_->stats();
  EXPECT_EQ(s.rx_dropped(RxDrop::bad_slot), 2U);
  EXPECT_EQ(s.rx_dropped(RxDrop::too_many_slots), 1U);
  EXPECT_EQ(s.broken, 0U);
}

// --- other frontends' rules (netfront-shim --mode) ---

constexpr std::uint32_t kRingSize = 256;

NetfrontOptions mini_os() {
  NetfrontOptions o;
  o.feature_keys = false;
  o.rx_notify = false;
  o.sg = false;
  o.split_event_channels = false;
  return o;
}

TEST_F(NetfrontWorld, MiniOsFrontendWritesOnlyItsKeysWithStateInTheSameTransaction) {
  BackendAdvert a;
  a.max_queues = 4;
  connect(mini_os(), a);
  std::set<std::string> got;
  for (const auto& [k, v] : backend_->frontend_keys()) got.insert(k);
  const std::set<std::string> want{"backend",     "backend-id",    "state",          "tx-ring-ref",
                                   "rx-ring-ref", "event-channel", "request-rx-copy"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(backend_->frontend_keys().at("state"), "4");
}

TEST_F(NetfrontWorld, MiniOsFrontendNeverKicksTheBackendWhenItRepostsRxBuffers) {
  // The same exchange twice: a Linux frontend kicks on refill, Mini-OS's does not.
  auto kicks_for = [&](const NetfrontOptions& o) {
    connect(o);
    (void)backend_->drain_events();
    const auto frame = pattern(200, 3);
    std::vector<RxPacket> out;
    for (int i = 0; i < 300; ++i) {
      if (!backend_->deliver_rx(frame)) break;
      (void)backend_->rx_requests_available(kRingSize + 1);  // req_event: "kick me on refill"
      (void)nf_->poll(out);
    }
    EXPECT_EQ(out.size(), 300U);
    EXPECT_GT(nf_->stats().rx_refills, 0U);
    const std::uint32_t kicks = backend_->drain_events();
    nf_->disconnect(0ms);
    backend_->detach();
    backend_->set_state(1);
    return kicks;
  };
  NetfrontOptions linux_fe;
  linux_fe.split_event_channels = false;
  EXPECT_GT(kicks_for(linux_fe), 0U);
  EXPECT_EQ(kicks_for(mini_os()), 0U);
}

TEST_F(NetfrontWorld, XenvifChecksDropAResponseOutOfItsSlotAndCountAGsoPacketMissingAFlag) {
  NetfrontOptions o;
  o.rx_checks = true;
  connect(o);
  std::vector<RxPacket> out;
  // A response at ring index 0 naming request 1: the data is in another buffer.
  wire::RxResponse r{};
  r.status = 60;
  r.id = 1;
  ASSERT_TRUE(backend_->deliver_raw_rx({r}, /*ids_as_given=*/true));
  EXPECT_EQ(nf_->poll(out), 0U);
  EXPECT_EQ(nf_->stats().rx_dropped(RxDrop::out_of_slot), 1U);
  EXPECT_EQ(nf_->stats().rx_protocol_errors, 1U);
  // GSO packets: with both flags fine; with csum_blank alone a protocol error (delivered).
  const auto frame = pattern(3000, 9);
  const RxGso gso{wire::GsoType::tcpv4, 1448};
  ASSERT_TRUE(
      backend_->deliver_rx(frame, gso, wire::RxFlag::csum_blank | wire::RxFlag::data_validated));
  ASSERT_TRUE(backend_->deliver_rx(frame, gso, wire::RxFlag::csum_blank));
  ASSERT_TRUE(backend_->deliver_rx(pattern(100, 1)));
  EXPECT_EQ(nf_->poll(out), 3U);
  const auto s = nf_->stats();
  EXPECT_EQ(s.rx_slot_checked, 4U);
  EXPECT_EQ(s.rx_gso_checked, 2U);
  EXPECT_EQ(s.rx_protocol_errors, 2U);
  EXPECT_EQ(s.broken, 0U);
}

TEST_F(NetfrontWorld, LinuxFrontendDoesNotCheckRxSlots) {
  connect();
  wire::RxResponse r{};
  r.status = 60;
  r.id = 1;
  ASSERT_TRUE(backend_->deliver_raw_rx({r}, /*ids_as_given=*/true));
  std::vector<RxPacket> out;
  EXPECT_EQ(nf_->poll(out), 1U);  // Linux netfront takes the buffer by ring index
  EXPECT_EQ(nf_->stats().rx_protocol_errors, 0U);
  EXPECT_EQ(nf_->stats().rx_slot_checked, 0U);
}

TEST_F(NetfrontWorld, XenvifTxExtrasChainGsoMcastAndHashAfterTheFirstRequest) {
  NetfrontOptions o;
  o.always_write_num_queues = true;
  connect(o);  // no multi-queue-max-queues advertised, and still:
  EXPECT_EQ(backend_->frontend_keys().at("multi-queue-num-queues"), "1");
  EXPECT_EQ(backend_->frontend_keys().count("tx-ring-ref"), 1U);  // flat keys for one queue
  TxMeta meta;
  meta.csum_blank = true;
  meta.gso = RxGso{wire::GsoType::tcpv4, 1448};
  meta.mcast = TxMeta::Mcast{true, {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}};
  meta.hash = netfront::RxHash{_XEN_NETIF_CTRL_HASH_TYPE_IPV4_TCP,
                               XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ, 0x12345678};
  const auto frame = pattern(9000, 5);
  ASSERT_TRUE(nf_->send(frame, meta));
  auto got = backend_->receive_tx();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, frame);
  ASSERT_EQ(got->extras.size(), 3U);
  EXPECT_EQ(got->extras[0].type, XEN_NETIF_EXTRA_TYPE_GSO);
  EXPECT_EQ(got->extras[1].type, XEN_NETIF_EXTRA_TYPE_MCAST_ADD);
  EXPECT_EQ(got->extras[2].type, XEN_NETIF_EXTRA_TYPE_HASH);
  EXPECT_NE(got->extras[0].flags & XEN_NETIF_EXTRA_FLAG_MORE, 0);
  EXPECT_NE(got->extras[1].flags & XEN_NETIF_EXTRA_FLAG_MORE, 0);
  EXPECT_EQ(got->extras[2].flags & XEN_NETIF_EXTRA_FLAG_MORE, 0);
  EXPECT_EQ(got->extras[2].u.hash.algorithm, XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ);
  std::uint32_t v = 0;
  std::memcpy(&v, got->extras[2].u.hash.value, 4);
  EXPECT_EQ(v, 0x12345678U);
  nf_->process_tx_responses();
  EXPECT_EQ(nf_->stats().tx_completed, 1U);
  EXPECT_EQ(nf_->stats().tx_error_responses, 0U);
}

TEST_F(NetfrontWorld, RxResponseProducerOverflowBreaksTheQueue) {
  connect();
  backend_->corrupt_rx_rsp_prod(1000);
  std::vector<RxPacket> out;
  EXPECT_EQ(nf_->poll(out), 0U);
  EXPECT_EQ(nf_->stats().broken, 1U);
  EXPECT_EQ(nf_->send(pattern(100, 1)).error(), std::errc::io_error);
}

TEST_F(NetfrontWorld, ThousandsOfPacketsBothWaysWrapTheRings) {
  NetfrontOptions o;
  o.tx_headroom = 66;
  o.rx_budget = 32;
  connect(o);
  std::vector<RxPacket> out;
  std::size_t rx_expected = 0;
  for (std::uint32_t i = 0; i < 3000; ++i) {
    const std::size_t len = 14 + (i * 977) % 20000;
    const auto frame = pattern(len, static_cast<std::uint8_t>(i));
    auto sent = nf_->send(frame);
    ASSERT_TRUE(sent) << i << ": " << sent.error().message();
    auto got = backend_->receive_tx();
    ASSERT_TRUE(got);
    ASSERT_EQ(got->bytes, frame) << i;
    nf_->process_tx_responses();
    ASSERT_TRUE(backend_->deliver_rx(frame)) << i;
    ++rx_expected;
    const std::size_t before = out.size();
    (void)nf_->poll(out);
    for (std::size_t k = before; k < out.size(); ++k) {
      const std::size_t idx = rx_expected - (out.size() - k);
      ASSERT_EQ(out[k].bytes.size(), 14 + (idx * 977) % 20000) << idx;
    }
  }
  EXPECT_EQ(out.size(), rx_expected);
  const auto s = nf_->stats();
  EXPECT_EQ(s.tx_completed, 3000U);
  EXPECT_EQ(s.rx_packets, 3000U);
  EXPECT_GT(backend_->rx_req_prod().value(), 256U * 10);
  EXPECT_EQ(nf_->queue(QueueId{0})->limiter_stats().zerocopy_success, s.tx_zerocopy);
}

// --- disconnect ---

TEST_F(NetfrontWorld, DisconnectClosesAndRevokesEveryGrant) {
  connect();
  ASSERT_TRUE(nf_->send(pattern(1514, 1)));
  auto held = backend_->receive_tx(/*hold_map=*/true);
  ASSERT_TRUE(held);
  const GrantRef tx_ref{held->requests[0].gref};
  const auto keys = backend_->frontend_keys();
  const GrantRef rx_ring{static_cast<std::uint32_t>(std::stoul(keys.at("rx-ring-ref")))};

  // The frontend closes in another thread; this one plays netback reacting to Closing.
  std::thread closer([&] { nf_->disconnect(kHangGuard); });
  ASSERT_TRUE(backend_->wait_frontend_state(5, kHangGuard));
  backend_->detach();  // unmaps the rings and unbinds, but one TX page stays mapped:
  auto still =
      dom0_->grant_table().map(domu_->self(), std::span(&tx_ref, 1), hv::Access::read_only);
  ASSERT_TRUE(still);
  backend_->set_state(6);
  closer.join();
  EXPECT_EQ(backend_->frontend_state(), 6);
  EXPECT_FALSE(nf_->connected());

  // Everything but the page we hold is revoked at once; that one is deferred.
  std::array<std::byte, 16> buf{};
  hv::GrantCopySegment seg{hv::GrantCopyPtr::granted(domu_->self(), rx_ring, 0),
                           hv::GrantCopyPtr::local(buf.data()), 16, 99};
  dom0_->grant_table().copy(std::span(&seg, 1));
  EXPECT_NE(seg.status, GNTST_okay);
  EXPECT_EQ(domu_->sim_grant_sharer().deferred_count(), 1U);
  still->reset();
  EXPECT_EQ(domu_->sim_grant_sharer().retry_deferred(), 0U);
  hv::GrantCopySegment seg2{hv::GrantCopyPtr::granted(domu_->self(), tx_ref, 0),
                            hv::GrantCopyPtr::local(buf.data()), 16, 99};
  dom0_->grant_table().copy(std::span(&seg2, 1));
  EXPECT_NE(seg2.status, GNTST_okay);
}

// --- the control ring: requests answered from the shim's event loop, which never waits ---

/// The guest side of netfront-shim's loop, on one thread: RX taken when the queue's event
/// channel fires (ShimLoop::on_event), and a 10 ms timer that counts its ticks; the largest
/// gap between two ticks (how long the loop was held by anything else) is a figure.
class GuestLoop {
 public:
  explicit GuestLoop(Netfront& nf) : nf_(nf), rx_(io, nf.event_fd()), ticker_(io) {}
  ~GuestLoop() { (void)rx_.release(); }
  GuestLoop(const GuestLoop&) = delete;
  GuestLoop& operator=(const GuestLoop&) = delete;

  /// Runs the loop until stop(), or until `done` holds (looked at every tick and after every
  /// RX event), at most `limit` (a guard against a hang).
  void run(std::function<bool()> done = {}, std::chrono::milliseconds limit = 60s) {
    done_ = std::move(done);
    arm_rx();
    last_tick_ = std::chrono::steady_clock::now();
    tick();
    io.run_for(limit);
    // A handler that held the loop up to its end shows here (no tick came after it).
    max_gap = std::max(max_gap, std::chrono::steady_clock::now() - last_tick_);
    done_ = {};
  }
  void stop() { io.stop(); }

  boost::asio::io_context io{1};
  std::atomic<std::uint64_t> rx_packets{0};
  std::atomic<std::uint64_t> ticks{0};
  std::chrono::steady_clock::duration max_gap{};

 private:
  void check_done() {
    if (done_ && done_()) io.stop();
  }
  void arm_rx() {
    if (rx_armed_) return;
    rx_armed_ = true;
    rx_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                   [this](const boost::system::error_code& ec) {
                     rx_armed_ = false;
                     if (ec) return;
                     (void)nf_.handle_event();
                     std::vector<RxPacket> got;
                     rx_packets += nf_.poll(got);
                     arm_rx();
                     check_done();
                   });
  }
  void tick() {
    const auto now = std::chrono::steady_clock::now();
    max_gap = std::max(max_gap, now - last_tick_);
    last_tick_ = now;
    ++ticks;
    ticker_.expires_after(10ms);
    ticker_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) tick();
    });
    check_done();
  }

  Netfront& nf_;
  boost::asio::posix::stream_descriptor rx_;
  boost::asio::steady_timer ticker_;
  std::chrono::steady_clock::time_point last_tick_{};
  bool rx_armed_ = false;
  std::function<bool()> done_;
};

double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

/// Calls `done` every millisecond until it holds, at most kHangGuard; whether it held.
template <typename F>
bool wait_until(F done) {
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

constexpr std::array<std::uint8_t, 40> kKey{
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

class CtrlRing : public NetfrontWorld {
 protected:
  void SetUp() override {
    NetfrontWorld::SetUp();
    NetfrontOptions opts;
    opts.ctrl_ring = true;
    BackendAdvert advert;
    advert.ctrl_ring = true;
    connect(opts, advert);
    ASSERT_TRUE(backend_->attach_ctrl());
    ASSERT_NE(nf_->ctrl(), nullptr) << "the backend offers feature-ctrl-ring";
  }

  /// Delivers one small frame to the guest every 10 ms (pacing) for `d`, or until `stop`
  /// holds (the backend's other work while it keeps a control request waiting); the number
  /// delivered.
  std::uint64_t trickle_rx(std::chrono::milliseconds d, const std::function<bool()>& stop = {}) {
    std::uint64_t sent = 0;
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until && !(stop && stop())) {
      if (backend_->deliver_rx(pattern(60, static_cast<std::uint8_t>(sent)))) ++sent;
      std::this_thread::sleep_for(10ms);
    }
    return sent;
  }
};

// A backend that takes its time: each of win-xenvif's five RSS requests is answered late,
// after the backend sent the guest a frame every 10 ms for 300 ms. The sequence completes,
// request after request, while the loop keeps taking the frames and its timer keeps ticking:
// nothing in the loop waits for the backend's answer. Each request is answered only once the
// guest took every frame sent meanwhile and its timer ticked: a loop held by the waiting
// request would take none, and the sequence would not complete.
TEST_F(CtrlRing, RssSequenceAnsweredLateLeavesTheLoopMovingFramesAndTicking) {
  constexpr auto kLate = 300ms;
  GuestLoop loop(*nf_);
  shim::CtrlRunner runner(loop.io.get_executor());
  const std::vector<std::uint32_t> mapping{0, 0, 0, 0};
  auto steps = nf_->ctrl()->rss_steps(kKey, mapping, wire::kHashTypesAll);
  ASSERT_TRUE(steps);

  std::vector<std::uint16_t> types;
  std::vector<std::byte> key_seen;
  struct WhileWaiting {
    std::uint64_t taken = 0, sent = 0, ticks = 0;
  };
  std::vector<WhileWaiting> waited;  // at each answer
  std::thread backend([&] {
    std::uint64_t sent = 0;
    for (int i = 0; i < 5; ++i) {
      auto req = backend_->wait_ctrl(kHangGuard);
      if (!req) return;
      const std::uint64_t ticks_at_request = loop.ticks;
      types.push_back(req->type);
      if (req->type == XEN_NETIF_CTRL_TYPE_SET_HASH_KEY)
        key_seen = backend_->read_granted(GrantRef{req->data[0]}, req->data[1]);
      sent += trickle_rx(kLate);
      (void)wait_until([&] { return loop.rx_packets >= sent && loop.ticks > ticks_at_request; });
      waited.push_back({loop.rx_packets.load(), sent, loop.ticks - ticks_at_request});
      backend_->answer_ctrl(*req);
    }
  });
  std::optional<std::error_code> result;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(runner.start(*nf_->ctrl(), std::move(*steps), [&](std::error_code ec) {
    result = ec;
    loop.stop();
  }));
  loop.run();
  const auto took = std::chrono::steady_clock::now() - t0;
  backend.join();

  ASSERT_TRUE(result) << "the sequence ended";
  EXPECT_FALSE(*result) << result->message();
  EXPECT_EQ(types,
            (std::vector<std::uint16_t>{
                XEN_NETIF_CTRL_TYPE_SET_HASH_ALGORITHM, XEN_NETIF_CTRL_TYPE_SET_HASH_MAPPING_SIZE,
                XEN_NETIF_CTRL_TYPE_SET_HASH_MAPPING, XEN_NETIF_CTRL_TYPE_SET_HASH_KEY,
                XEN_NETIF_CTRL_TYPE_SET_HASH_FLAGS}))
      << "win-xenvif's order, one request at a time";
  EXPECT_EQ(key_seen, std::vector<std::byte>(std::as_bytes(std::span(kKey)).begin(),
                                             std::as_bytes(std::span(kKey)).end()))
      << "the key was in the data page when its request went out";
  ASSERT_EQ(waited.size(), 5U);
  for (std::size_t i = 0; i < waited.size(); ++i) {
    EXPECT_GT(waited[i].sent, 0U);
    EXPECT_EQ(waited[i].taken, waited[i].sent)
        << "request " << i << ": the guest took every frame sent while it waited";
    EXPECT_GT(waited[i].ticks, 0U) << "request " << i << ": the timer ticked while it waited";
  }
  std::cout << "[ ctrl ] 5 requests answered after " << ms(kLate) << " ms of frames each: sequence "
            << ms(took) << " ms, " << loop.rx_packets << " frames taken meanwhile\n";
  test::report_figure("netfront_ctrl_late_answers_loop_max_gap_ms", ms(loop.max_gap), "ms");
}

// A backend that never answers: the request is given up after its timeout with timed_out
// (not before it), and no further request is sent; the loop's timer ticks while it waits,
// and the guest's traffic flows on after it was given up: every frame the backend sent is
// taken. The answer that finally comes late is skipped, so the next sequence works.
TEST_F(CtrlRing, UnansweredRequestTimesOutWhileTrafficContinuesAndItsLateAnswerIsSkipped) {
  constexpr auto kTimeout = 250ms;
  GuestLoop loop(*nf_);
  shim::CtrlRunner runner(loop.io.get_executor());
  auto steps = nf_->ctrl()->rss_steps(kKey, std::vector<std::uint32_t>{0}, 0);
  ASSERT_TRUE(steps);

  std::atomic<bool> stop_sending{false};
  std::atomic<std::uint64_t> sent{0};
  std::thread backend([&] { sent = trickle_rx(kHangGuard, [&] { return stop_sending.load(); }); });
  std::optional<std::error_code> result;
  std::error_code start_error;
  std::chrono::steady_clock::time_point t0;
  std::chrono::steady_clock::duration failed_after{};
  std::uint64_t taken_at_failure = 0, ticks_at_start = 0, ticks_at_failure = 0;
  // Started from the loop, once its ticker is armed: the ticker's first 10 ms expiry comes
  // before the request's timeout.
  boost::asio::post(loop.io, [&] {
    ticks_at_start = loop.ticks;
    t0 = std::chrono::steady_clock::now();
    start_error = runner.start(
        *nf_->ctrl(), std::move(*steps),
        [&](std::error_code ec) {
          result = ec;
          failed_after = std::chrono::steady_clock::now() - t0;
          taken_at_failure = loop.rx_packets;
          ticks_at_failure = loop.ticks;
        },
        kTimeout);
  });
  // The loop runs on past the failure, as the shim does: it keeps serving traffic, until
  // frames came in after the request was given up.
  loop.run([&] { return start_error || (result && loop.rx_packets > taken_at_failure + 2); });
  stop_sending = true;
  backend.join();
  ASSERT_FALSE(start_error) << start_error.message();
  // Every frame sent is taken.
  loop.io.restart();
  loop.run([&] { return loop.rx_packets >= sent.load(); });

  ASSERT_TRUE(result) << "the sequence ended";
  EXPECT_EQ(*result, std::errc::timed_out);
  EXPECT_GE(failed_after, kTimeout) << "given up before its timeout";
  EXPECT_LT(failed_after, kTimeout + kHangGuard) << "not given up at its timeout";
  EXPECT_EQ(nf_->ctrl()->requests(), 1U) << "nothing sent after the unanswered request";
  EXPECT_FALSE(runner.busy());
  // The ticker's next 10 ms expiry came before the request's 250 ms one: however late the
  // loop runs, asio fires its timers in expiry order, so the loop ticked before it gave up.
  EXPECT_GT(ticks_at_failure, ticks_at_start) << "the timer ticked while the request waited";
  EXPECT_GT(loop.rx_packets, taken_at_failure) << "frames taken after it was given up";
  EXPECT_EQ(loop.rx_packets, sent.load());
  std::cout << "[ ctrl ] unanswered request given up after " << ms(failed_after) << " ms (timeout "
            << ms(kTimeout) << " ms); " << taken_at_failure << " frames taken while it waited, "
            << loop.rx_packets << " in all\n";
  test::report_figure("netfront_ctrl_unanswered_given_up_after_ms", ms(failed_after), "ms");
  test::report_figure("netfront_ctrl_unanswered_frames_taken_while_waiting",
                      static_cast<double>(taken_at_failure), "frames");
  test::report_figure("netfront_ctrl_unanswered_loop_max_gap_ms", ms(loop.max_gap), "ms");

  // The backend wakes up: its answer to the abandoned request, then a prompt backend. The
  // re-map (size and table: no size was ever acknowledged) succeeds.
  auto stale = backend_->take_ctrl();
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->type, XEN_NETIF_CTRL_TYPE_SET_HASH_ALGORITHM);
  backend_->answer_ctrl(*stale);
  std::thread prompt([&] {
    for (int i = 0; i < 2; ++i)
      if (auto req = backend_->wait_ctrl(kHangGuard)) backend_->answer_ctrl(*req);
  });
  auto remap = nf_->ctrl()->mapping_steps(std::vector<std::uint32_t>{0, 0});
  ASSERT_TRUE(remap);
  EXPECT_EQ(remap->size(), 2U);
  result.reset();
  ASSERT_FALSE(runner.start(*nf_->ctrl(), std::move(*remap), [&](std::error_code ec) {
    result = ec;
    loop.stop();
  }));
  loop.io.restart();
  loop.run();
  prompt.join();
  ASSERT_TRUE(result);
  EXPECT_FALSE(*result) << result->message() << ": the late answer was taken for the new request";
  EXPECT_EQ(nf_->ctrl()->requests(), 3U);
}

}  // namespace
}  // namespace unetback::test
