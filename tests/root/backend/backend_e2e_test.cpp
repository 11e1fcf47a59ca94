// The backend end to end: the vif lifecycle and the data paths in both directions, with a
// real xensim, the backend's xenbus + Vif and the userspace Netfront (see backend_fixture.hpp).
#include <filesystem>
#include <thread>

#include "tests/root/backend/backend_fixture.hpp"
#include "tests/support/figure.hpp"

namespace unetback::test {
namespace {

TEST_F(BackendEndToEnd, HandshakeWaitsForHotplugBeforeConnected) {
  add_vif();
  // The TAP exists before InitWait, so the hotplug script can find it.
  EXPECT_NE(::if_nametoindex(tap_name().c_str()), 0u);
  EXPECT_EQ(*toolstack_xs_->read(be_path() + "/feature-rx-copy"), "1");
  EXPECT_EQ(*toolstack_xs_->read(be_path() + "/feature-sg"), "1");
  connect_guest();
  // Frontend connected, hotplug not run yet: once the backend has read the frontend's
  // Connected (its view, updated by the watch handler that decides), it is still in InitWait.
  EXPECT_TRUE(wait_for([&] {
    const std::lock_guard lock(mu_);
    return guest().xenbus->view().frontend == xenbus::XenbusState::connected;
  })) << "the backend never saw the frontend's Connected";
  EXPECT_EQ(read_state(*toolstack_xs_, be_path() + "/state"), XenbusState::init_wait);
  run_hotplug();
  EXPECT_FALSE(wait_state(XenbusState::connected));
  EXPECT_TRUE(guest().vif->report().connected);
}

class GuestToHost : public BackendEndToEnd, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(GuestToHost, FrameArrivesIntactOnTheTap) {
  bring_up(9000);
  const auto frame = tcp_frame(GetParam(), 7);
  ASSERT_TRUE(guest().netfront->send(frame).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), frame.size()));
  ASSERT_TRUE(guest_settle_all()) << "the packet was never answered";
  EXPECT_EQ(counter("tx_packets"), 1u);
  EXPECT_EQ(guest().netfront->stats().tx_error_responses, 0u);
}

// 60 and 1514 bytes (one slot), 9000 (three slots); payload sizes give these frame lengths.
INSTANTIATE_TEST_SUITE_P(Sizes, GuestToHost, ::testing::Values(6u, 1460u, 8946u));

TEST_F(BackendEndToEnd, GuestGsoSuperFrameReachesTheHostAsOnePacket) {
  bring_up();
  const auto frame = tcp_frame(64000, 3, net::L4ChecksumMode::partial);
  netfront::TxMeta meta;
  meta.csum_blank = true;
  meta.gso = netfront::RxGso{wire::GsoType::tcpv4, 1448};
  ASSERT_TRUE(guest().netfront->send(frame, meta).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  // Everything but the TCP checksum field (the kernel may fill it) is the guest's bytes.
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), 14 + 20 + 16));
  EXPECT_EQ(0, std::memcmp(got.data() + 54, frame.data() + 54, frame.size() - 54));
}

class HostToGuest : public BackendEndToEnd, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(HostToGuest, FrameUsesTheMinimalNumberOfSlots) {
  bring_up(9000);
  const auto frame = tcp_frame(GetParam(), 11);
  host_send(frame);
  auto pkt = guest_receive();
  ASSERT_TRUE(pkt.has_value());
  ASSERT_EQ(pkt->bytes.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(pkt->bytes.data(), frame.data(), frame.size()));
  EXPECT_EQ(pkt->slots_used, (frame.size() + 4095) / 4096);
  EXPECT_EQ(counter("rx_slots"), counter("rx_min_slots"));
}

INSTANTIATE_TEST_SUITE_P(Sizes, HostToGuest, ::testing::Values(6u, 1460u, 8946u));

// Guest RX from the TAP: a burst of frames from the host, sent before the guest takes any,
// must reach the guest whole and in the order the host sent it.
class TapReads : public BackendEndToEnd {
 protected:
  void expect_host_burst_in_order(int burst) {
    auto& t = *this;
    for (int i = 0; i < burst; ++i)
      t.host_send(tcp_frame(300 + static_cast<std::size_t>(i), static_cast<std::uint8_t>(i)));
    std::vector<netfront::RxPacket> got;
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (got.size() < static_cast<std::size_t>(burst) &&
           std::chrono::steady_clock::now() < deadline) {
      t.guest().netfront->handle_event();
      (void)t.guest().netfront->poll(got);
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(got.size(), static_cast<std::size_t>(burst));
    for (int i = 0; i < burst; ++i) {
      const auto want = tcp_frame(300 + static_cast<std::size_t>(i), static_cast<std::uint8_t>(i));
      ASSERT_EQ(got[static_cast<std::size_t>(i)].bytes, want)
          << "frame " << i << " out of order or damaged";
    }
  }
};

// The TAP's frames are taken in batches (one io_uring_enter for all the frames a wakeup finds,
// and for the read that finds the TAP empty): a burst reaches the guest whole and in the order
// the host sent it, and the TAP costs no more syscalls than frames (a read() loop costs one
// per frame plus one per wakeup).
TEST_F(TapReads, AHostBurstReachesTheGuestInOrderThroughBatchedReads) {
  bring_up();
  constexpr int kBurst = 200;
  expect_host_burst_in_order(kBurst);
  const std::uint64_t syscalls = counter("rx_tap_syscalls");
  std::cout << "[ tap reads ] " << kBurst << " frames in " << syscalls << " TAP syscalls ("
            << (counter("rx_tap_posted_reads") != 0 ? "posted reads"
                : counter("rx_tap_io_uring") != 0   ? "io_uring"
                                                    : "read()")
            << ")\n";
  test::report_figure("backend_tap_reads_syscalls_per_frame",
                      static_cast<double>(syscalls) / kBurst, "syscalls/frame");
  if (counter("rx_tap_io_uring") != 0) {
    EXPECT_LE(syscalls, static_cast<std::uint64_t>(kBurst));
    EXPECT_EQ(counter("rx_tap_parked_reads"), 0u);
  } else {
    EXPECT_GT(syscalls, static_cast<std::uint64_t>(kBurst));
  }
}

// Where the TAP refuses reads that must not wait (Debian 12's Linux 6.1), reads are kept
// posted in io_uring and each frame completes one without a syscall: forced here with
// UNETBACK_TAP_READS=posted, the path 6.1 takes. The burst arrives whole and in order, and
// the TAP costs far fewer syscalls than frames (an io_uring_enter posts the buffers of a
// wakeup again); the vif closes with reads still posted (the teardown cancels them).
TEST_F(TapReads, AHostBurstReachesTheGuestInOrderThroughReadsKeptPosted) {
  ::setenv("UNETBACK_TAP_READS", "posted", 1);
  bring_up();
  ::unsetenv("UNETBACK_TAP_READS");
  if (counter("rx_tap_posted_reads") == 0) GTEST_SKIP() << "io_uring unavailable here";
  constexpr int kBurst = 200;
  expect_host_burst_in_order(kBurst);
  const std::uint64_t syscalls = counter("rx_tap_syscalls");
  std::cout << "[ tap reads ] " << kBurst << " frames in " << syscalls
            << " TAP syscalls (reads kept posted)\n";
  // A frame completes a posted read without a syscall; an io_uring_enter per wakeup posts the
  // buffers again, and a wakeup finds at least one frame: never more syscalls than frames (a
  // read() loop costs one per frame and one per wakeup). How far below is the machine's pace:
  // a figure.
  test::report_figure("backend_tap_posted_reads_syscalls_per_frame",
                      static_cast<double>(syscalls) / kBurst, "syscalls/frame");
  EXPECT_LE(syscalls, static_cast<std::uint64_t>(kBurst));
  EXPECT_EQ(counter("rx_dropped_offload"), 0u);
  // And frames sent one at a time, each to an idle queue, are each delivered too.
  for (int i = 0; i < 5; ++i) {
    const auto frame = tcp_frame(100 + static_cast<std::size_t>(i), 9);
    host_send(frame);
    auto pkt = guest_receive();
    ASSERT_TRUE(pkt.has_value()) << "frame " << i;
    EXPECT_EQ(pkt->bytes, frame);
  }
}

TEST_F(BackendEndToEnd, AnIdleQueueStopsItsTimerAndWakesForTheNextFrame) {
  bring_up();
  const auto frame = tcp_frame(200, 12);
  host_send(frame);
  ASSERT_TRUE(guest_receive().has_value());
  // Then nothing: the 100 ms housekeeping pass runs for 2 s after the last work and stops, so
  // an idle guest costs no wake-up. Waited for as "no pass in 300 ms" (a queue that kept its
  // timer makes three in that time), then watched for a whole second more.
  std::uint64_t passes = counter("housekeeping_passes");
  ASSERT_TRUE(wait_for([&] {
    const auto before = counter("housekeeping_passes");
    std::this_thread::sleep_for(300ms);  // an observation window, not a synchronisation
    passes = counter("housekeeping_passes");
    return passes == before;
  })) << "the housekeeping timer never stopped";
  std::this_thread::sleep_for(1s);  // an observation window: nothing may happen in it
  EXPECT_EQ(counter("housekeeping_passes"), passes) << "an idle queue woke up on a timer";
  // New work wakes the queue at once and the timer runs again.
  host_send(frame);
  auto pkt = guest_receive();
  ASSERT_TRUE(pkt.has_value());
  EXPECT_EQ(pkt->bytes, frame);
  EXPECT_TRUE(wait_for([&] { return counter("housekeeping_passes") > passes; }));
}

TEST_F(BackendEndToEnd, HostGsoFrameArrivesAsOnePacketWithAGsoExtra) {
  bring_up();
  open_packet_socket(true);
  // 65226 bytes: the largest TSO frame the scenarios name.
  auto frame = tcp_frame(65226 - 54, 5, net::L4ChecksumMode::partial);
  virtio_net_hdr vh{};
  vh.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  vh.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
  vh.hdr_len = 54;
  vh.gso_size = 1448;
  vh.csum_start = 34;
  vh.csum_offset = 16;
  std::vector<std::byte> out(sizeof vh + frame.size());
  std::memcpy(out.data(), &vh, sizeof vh);
  std::memcpy(out.data() + sizeof vh, frame.data(), frame.size());
  host_send(out);
  auto pkt = guest_receive();
  ASSERT_TRUE(pkt.has_value());
  ASSERT_EQ(pkt->bytes.size(), frame.size());
  ASSERT_TRUE(pkt->gso.has_value());
  EXPECT_EQ(pkt->gso->type, wire::GsoType::tcpv4);
  EXPECT_EQ(pkt->gso->size, 1448);
  EXPECT_EQ(pkt->slots_used, 16u + 1u);  // ceil(65226/4096) = 16 data slots + the GSO extra
  EXPECT_TRUE(pkt->flags.has(wire::RxFlag::csum_blank));
  EXPECT_EQ(0, std::memcmp(pkt->bytes.data() + 54, frame.data() + 54, frame.size() - 54));
}

TEST_F(BackendEndToEnd, TinyFirstSlotsAreGatheredAndEighteenSlotsPass) {
  bring_up();
  const auto frame = tcp_frame(4000, 9);
  // XSA-423: the headers spread over a 20-byte first slot and tiny frags.
  std::vector<netfront::RawTxSlot> slots = {{0, 20}, {0, 10}, {0, 30}};
  std::size_t used = 60;
  while (used < frame.size()) {
    const std::uint16_t n =
        static_cast<std::uint16_t>(std::min<std::size_t>(512, frame.size() - used));
    slots.push_back({0, n});
    used += n;
  }
  ASSERT_LE(slots.size(), 18u);
  ASSERT_TRUE(guest().netfront->send_raw(slots, frame).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), frame.size()));
}

TEST_F(BackendEndToEnd, NineteenSlotsAreDroppedWithErrorResponsesAndTheVifStaysUp) {
  bring_up();
  const auto frame = tcp_frame(1800, 1);
  std::vector<netfront::RawTxSlot> slots(19, netfront::RawTxSlot{0, 100});
  slots.back().size = static_cast<std::uint16_t>(frame.size() - std::size_t{18} * 100);
  ASSERT_TRUE(guest().netfront->send_raw(slots, frame).has_value());
  ASSERT_TRUE(guest_settle_all()) << "the packet was never answered";
  EXPECT_EQ(guest().netfront->stats().tx_error_responses, 19u);
  EXPECT_EQ(counter("tx_drop_too_many_slots"), 1u);
  EXPECT_FALSE(guest().vif->disabled());
  // The vif still carries traffic.
  const auto ok = tcp_frame(100, 2);
  ASSERT_TRUE(guest().netfront->send(ok).has_value());
  EXPECT_EQ(host_receive().size(), ok.size());
}

TEST_F(BackendEndToEnd, TwentySlotsDisableTheVif) {
  bring_up();
  const auto frame = tcp_frame(2000, 1);
  std::vector<netfront::RawTxSlot> slots(20, netfront::RawTxSlot{0, 100});
  slots.back().size = static_cast<std::uint16_t>(frame.size() - std::size_t{19} * 100);
  ASSERT_TRUE(guest().netfront->send_raw(slots, frame).has_value());
  EXPECT_TRUE(wait_for([&] { return guest().vif->disabled(); }));
  EXPECT_EQ(counter("tx_fatal"), 1u);
}

TEST_F(BackendEndToEnd, ZeroSizeSlotsAreAnsweredAndSkipped) {
  bring_up();
  const auto frame = tcp_frame(300, 4);
  std::vector<netfront::RawTxSlot> slots = {
      {0, 100}, {0, 0}, {0, static_cast<std::uint16_t>(frame.size() - 100)}};
  ASSERT_TRUE(guest().netfront->send_raw(slots, frame).has_value());
  const auto got = host_receive();
  ASSERT_EQ(got.size(), frame.size());
  EXPECT_EQ(0, std::memcmp(got.data(), frame.data(), frame.size()));
  ASSERT_TRUE(guest_settle_all()) << "the packet was never answered";
  EXPECT_EQ(guest().netfront->stats().tx_error_responses, 0u);
  EXPECT_EQ(counter("tx_zero_size_slots"), 1u);
}

TEST_F(BackendEndToEnd, FourQueuesEachCarryTraffic) {
  netfront::NetfrontOptions opts;
  opts.queues = 4;
  bring_up(1500, opts);
  ASSERT_EQ(guest().netfront->num_queues(), 4u);
  ASSERT_EQ(guest().vif->report().queues.size(), 4u);
  for (std::uint32_t q = 0; q < 4; ++q) {
    const auto frame = tcp_frame(500 + q, static_cast<std::uint8_t>(q));
    ASSERT_TRUE(guest().netfront->send(frame, {}, QueueId{q}).has_value());
    const auto got = host_receive();
    ASSERT_EQ(got.size(), frame.size()) << "queue " << q;
  }
  std::uint32_t queues_used = 0;
  for (const auto& q : guest().vif->report().queues) {
    for (const auto& [k, v] : q.counters) {
      if (k == "tx_packets" && v == 1) ++queues_used;
    }
  }
  EXPECT_EQ(queues_used, 4u);
}

TEST_F(BackendEndToEnd, RateLimitCapsGuestTransmit) {
  toolstack::VifSpec spec;
  spec.rate = "100000,100000";  // 100 kB every 100 ms
  add_vif(spec);
  run_hotplug();
  connect_guest();
  ASSERT_FALSE(wait_state(XenbusState::connected));
  open_packet_socket();
  const auto frame = tcp_frame(1400, 6);
  const auto start = std::chrono::steady_clock::now();
  std::size_t sent = 0;
  for (int i = 0; i < 600; ++i) {
    if (guest().netfront->send(frame).has_value()) ++sent;
    guest().netfront->process_tx_responses();
  }
  // What reaches the TAP in about 250 ms. An upper bound, whatever the machine's load: the
  // burst (128 KiB), then 100 kB per 100 ms interval begun in the time that really passed
  // (taken after the last frame was read, so a late wakeup only raises the bound).
  std::size_t bytes = 0;
  while (std::chrono::steady_clock::now() - start < 250ms) {
    const auto got = host_receive(20ms);  // a collection window, not a deadline
    bytes += got.size();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const auto intervals = static_cast<std::size_t>(elapsed / 100ms) + 1;
  EXPECT_GT(sent, 0u);
  EXPECT_LE(bytes, std::uint64_t{128} * 1024 + intervals * 100000 + 1500)
      << "in " << std::chrono::duration<double, std::milli>(elapsed).count() << " ms";
  test::report_figure("backend_rate_limit_bytes_in_window", static_cast<double>(bytes), "B");
  EXPECT_GT(counter("tx_rate_limited"), 0u);
}

/// Open file descriptors of this process: every xensim port is an eventfd, every TAP queue,
/// event-channel handle and grant-table handle an fd.
std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST_F(BackendEndToEnd, RemovalClosesReleasesEverythingAndRemovesTheTap) {
  const std::size_t fds_before = open_fds();
  netfront::NetfrontOptions two_queues;
  two_queues.queues = 2;
  bring_up(1500, two_queues);
  ASSERT_TRUE(guest().netfront->send(tcp_frame(100, 1)).has_value());
  EXPECT_FALSE(host_receive().empty());
  ASSERT_FALSE(toolstack::remove_vif(*toolstack_xs_, kDom0, guest().dom, DevId{0}));
  // libxl waited for state 6 and removed the dirs; the backend tore the vif down.
  EXPECT_EQ(::if_nametoindex(tap_name().c_str()), 0u);
  EXPECT_FALSE(guest().vif->report().connected);
  // The guest can revoke every grant: nothing is still mapped by the backend.
  guest().netfront->disconnect(kHangGuard);
  EXPECT_EQ(guest().hv->sim_grant_sharer().deferred_count(), 0u);
  // Nothing of the vif is left: no port, no handle, no TAP queue, no socket.
  guest().netfront.reset();
  guest().sock.reset();
  {
    const std::lock_guard lock(mu_);
    guest().xenbus.reset();
    guest().vif.reset();
  }
  EXPECT_EQ(open_fds(), fds_before);
}

// Mini-OS's netfront: no feature-rx-notify, no feature-sg, state 4 in the connect transaction.
// It never kicks when it posts RX buffers, so the backend must look at the ring by itself.
TEST_F(BackendEndToEnd, FrontendWithoutRxNotifyGetsABurstLargerThanItsRingByPolling) {
  netfront::NetfrontOptions mini;
  mini.feature_keys = false;
  mini.rx_notify = false;
  mini.sg = false;
  mini.split_event_channels = false;
  // The ring's 256 frames fill the posted buffers; the guest takes two polls' worth of them
  // without posting new buffers (the old half-ring refill rule posts only once more than half
  // the ring is free); then 48 more frames come and find no buffer; the guest's next poll posts
  // buffers without telling the backend, and no more host traffic comes to wake it: the
  // backend must look at the ring by itself.
  // In two steps, because a frame that waits for buffers expires 30 ms after it was queued
  // (Linux's drain timeout for such a frontend): a burst sent at once had its last frames
  // queued while a slow machine (TSan beside the lab) was still filling the ring, and they
  // expired before the guest could look.
  mini.rx_refill = netfront::RxRefillRule::half_ring;
  bring_up(1500, mini);
  EXPECT_FALSE(toolstack_xs_->read("/local/domain/" + std::to_string(guest().dom.value()) +
                                   "/device/vif/0/feature-rx-notify"));
  constexpr int kRing = static_cast<int>(ring::RxBackRing::kSize);
  constexpr int kBurst = kRing + 48;
  const auto frame = tcp_frame(1000, 3);
  for (int i = 0; i < kRing; ++i) host_send(frame);
  const auto filled_by = std::chrono::steady_clock::now() + kHangGuard;
  while (counter("rx_packets") < ring::RxBackRing::kSize &&
         std::chrono::steady_clock::now() < filled_by)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(counter("rx_packets"), std::uint64_t{ring::RxBackRing::kSize});
  std::size_t got = 0;
  std::vector<netfront::RxPacket> out;
  const auto guest_poll = [&] {
    guest().netfront->handle_event();
    out.clear();
    got += guest().netfront->poll(out);  // refills by its rule, never kicks
  };
  guest_poll();
  guest_poll();
  ASSERT_EQ(got, 2u * mini.rx_budget);
  ASSERT_EQ(guest().netfront->stats().rx_refills, 0u);
  const auto waits_before = counter("rx_waits_for_slots");
  for (int i = kRing; i < kBurst; ++i) host_send(frame);
  // The backend reads all 48 off the TAP and finds no posted buffer (its RX pass stops on the
  // head packet). Only then does the guest refill: from here on nothing but the backend's own
  // look at the ring delivers them, well inside their 30 ms on any machine that got this far.
  // All 48 must be in the backend's queue, not only the first: under TSan in CI the backend
  // had read a first batch when the guest refilled, and its next TAP read delivered all of
  // them (the poll found none). The report is taken on the queue's thread between its passes,
  // so the pass that queued the last of them is over.
  const auto all_queued = std::uint64_t{kBurst - kRing} * frame.size();
  const auto found_none_by = std::chrono::steady_clock::now() + kHangGuard;
  while (
      (counter("rx_queued_bytes") < all_queued || counter("rx_waits_for_slots") == waits_before) &&
      std::chrono::steady_clock::now() < found_none_by)
    std::this_thread::sleep_for(100us);
  ASSERT_EQ(counter("rx_queued_bytes"), all_queued);
  ASSERT_GT(counter("rx_waits_for_slots"), waits_before);
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (got < kBurst && std::chrono::steady_clock::now() < deadline) {
    guest_poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(got, static_cast<std::size_t>(kBurst));
  EXPECT_EQ(guest().netfront->stats().rx_notify_sent, 0u);
  EXPECT_GT(guest().netfront->stats().rx_refills, 0u);
  EXPECT_EQ(counter("rx_dropped_expired"), 0u);
  // The guest's refill told the backend nothing, and no host frame came after it: the 48 went
  // out by the backend's own looks at the ring, the 30 ms poll armed when the pass stopped
  // (polls > 0) or, when it came first, the queue's 100 ms housekeeping pass (once in 10 runs
  // under TSan beside three busy loops). FrontendWithRxNotifyIsNeverPolled asserts the other
  // side (0 polls for a frontend that kicks); the Mini-OS guest's end-to-end test reports the
  // share the poll delivered over an iperf3 run as a figure.
  // The poll was armed when the pass stopped; when housekeeping delivered the 48 first, it
  // fires up to 30 ms after that (CI #9 under TSan read the counters before it had).
  const auto poll_fired_by = std::chrono::steady_clock::now() + kHangGuard;
  while (counter("rx_polls") == 0 && std::chrono::steady_clock::now() < poll_fired_by)
    std::this_thread::sleep_for(1ms);
  EXPECT_GT(counter("rx_polls"), 0u);
  EXPECT_EQ(counter("rx_poll_packets") + counter("rx_housekeeping_packets"),
            static_cast<std::uint64_t>(kBurst - kRing));
  std::cout << "[ rx poll ] polls " << counter("rx_polls") << ", packets delivered by them "
            << counter("rx_poll_packets") << ", by housekeeping "
            << counter("rx_housekeeping_packets") << ", of " << kBurst << "\n";
  EXPECT_EQ(counter("rx_packets"), static_cast<std::uint64_t>(kBurst));
  // One slot per packet: no scatter-gather.
  EXPECT_EQ(counter("rx_slots"), static_cast<std::uint64_t>(kBurst));
}

TEST_F(BackendEndToEnd, FrontendWithRxNotifyIsNeverPolled) {
  bring_up();
  const auto frame = tcp_frame(1000, 3);
  for (int i = 0; i < 400; ++i) host_send(frame);
  std::size_t got = 0;
  std::vector<netfront::RxPacket> out;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (got < 400 && std::chrono::steady_clock::now() < deadline) {
    guest().netfront->handle_event();
    out.clear();
    got += guest().netfront->poll(out);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(got, 400u);
  EXPECT_GT(guest().netfront->stats().rx_notify_sent, 0u);  // its refills kick
  EXPECT_EQ(counter("rx_polls"), 0u);
}

}  // namespace
}  // namespace unetback::test
