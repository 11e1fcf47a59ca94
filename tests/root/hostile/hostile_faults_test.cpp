// Faults around the protocol rather than in it: a frontend that dies at every step of the
// xenbus handshake and in the middle of a transfer, and the event channel losing or delaying
// notifications (xensim's fault injection). After each: the backend lets the vif go entirely
// (nothing leaked), a fresh guest connects, and no packet is left unaccounted for.
#include <cstring>

#include "backend/daemon/fd_store.hpp"
#include "tests/root/hostile/hostile_fixture.hpp"
#include "tests/support/fd_limit.hpp"

namespace unetback::hostile_suite {
using namespace unetback::test;
using Rogue = test::HostileFrontend;
namespace {

class HostileFrontend : public HostileTest {};

/// Where the frontend dies.
enum class KillPoint {
  before_device,   // the domain is gone before the toolstack adds the vif
  init_wait,       // backend in InitWait, frontend wrote nothing
  rings_granted,   // pages granted and a port allocated, nothing published
  keys_published,  // ring refs and event channel written, no state yet
  initialised,     // state 3 (Initialised)
  connecting,      // state 4 written, vanish before the backend could connect
  connected,       // backend Connected
  mid_transfer,    // packets in flight both ways, grants mapped
  closing,         // frontend wrote Closing, backend not yet Closed
};

const char* kill_point_name(KillPoint k) {
  switch (k) {
    case KillPoint::before_device: return "before_device";
    case KillPoint::init_wait: return "init_wait";
    case KillPoint::rings_granted: return "rings_granted";
    case KillPoint::keys_published: return "keys_published";
    case KillPoint::initialised: return "initialised";
    case KillPoint::connecting: return "connecting";
    case KillPoint::connected: return "connected";
    case KillPoint::mid_transfer: return "mid_transfer";
    case KillPoint::closing: return "closing";
  }
  return "?";
}

/// Puts `n` TX packets of `f` on the ring, each on its own page (zerocopy-sized), and
/// floods the guest's TAP so guest-RX copies are running too.
void start_transfer(HostileTest& t, Rogue& bad, const PacketSocket& sock, std::size_t n) {
  ASSERT_FALSE(bad.post_rx(128));
  const auto f = HostileTest::frame(1200, 21);
  for (std::size_t i = 0; i < 100; ++i) (void)sock.send(f, MSG_DONTWAIT);
  std::uint16_t id = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto p = bad.grant_page(hv::Access::read_only);
    ASSERT_TRUE(p.has_value());
    std::memcpy(p->data, f.data(), f.size());
    bad.tx().put_request(
        HostileTest::tx_request(p->ref, 0, static_cast<std::uint16_t>(f.size()), id++));
  }
  bad.push_tx();
  (void)t;
}

TEST_F(HostileFrontend, HandshakeKillLoop_FrontendDiesAtEveryStep) {
  const auto base = resources();
  const std::size_t base_vifs = vif_count();
  for (auto k : {KillPoint::before_device, KillPoint::init_wait, KillPoint::rings_granted,
                 KillPoint::keys_published, KillPoint::initialised, KillPoint::connecting,
                 KillPoint::connected, KillPoint::mid_transfer, KillPoint::closing}) {
    SCOPED_TRACE(kill_point_name(k));
    std::unique_ptr<Rogue> bad;
    DomId dom{};
    if (k == KillPoint::before_device) {
      bad = std::make_unique<Rogue>(world_->dir(), "kill", dom0_.get());
      bad->attach();
      dom = bad->dom();
      bad.reset();
      // libxl adds the device of a domain that has just died (its own race).
      toolstack::VifSpec spec;
      ASSERT_FALSE(toolstack::add_vif(*toolstack_xs_, kDom0, dom, spec));
      sync_daemon();  // the daemon has seen the device (and must have left it alone)
      ASSERT_FALSE(HasFatalFailure());
    } else {
      bad = hostile("kill");
      ASSERT_FALSE(HasFatalFailure());
      dom = bad->dom();
      PacketSocket sock;
      if (k >= KillPoint::rings_granted) {
        ASSERT_FALSE(bad->make_rings());
      }
      if (k >= KillPoint::keys_published) {
        ASSERT_FALSE(bad->publish({}, std::nullopt));
      }
      if (k == KillPoint::initialised) {
        ASSERT_FALSE(bad->set_state(XenbusState::initialised));
      }
      if (k >= KillPoint::connecting) {
        ASSERT_FALSE(bad->set_state(XenbusState::connected));
      }
      if (k >= KillPoint::connected) {
        ASSERT_FALSE(wait_backend(dom, XenbusState::connected));
      }
      if (k == KillPoint::mid_transfer) {
        sock = tap_socket(dom);
        start_transfer(*this, *bad, sock, 64);
        ASSERT_FALSE(HasFatalFailure());
        // The backend is busy with it (grants mapped, copies running) when the guest dies.
        EXPECT_TRUE(wait_for([&] { return counter(dom, "tx_packets") > 0; }))
            << "the transfer never started";
      }
      if (k == KillPoint::closing) {
        ASSERT_FALSE(bad->set_state(XenbusState::closing));
      }
      bad.reset();  // the domain dies here
    }
    // @releaseDomain: the daemon tears the vif down by itself, whatever the step.
    EXPECT_TRUE(wait_for([&] { return !has_vif(dom); }))
        << "the daemon kept the vif of a dead domain (backend state "
        << describe(backend_state(dom)) << ")";
    // libxl then deletes the device nodes of the destroyed domain.
    toolstack::delete_vif_nodes(*toolstack_xs_, kDom0, dom, DevId{0});
    EXPECT_EQ(vif_count(), base_vifs);
    expect_no_leak(base);
    expect_log_bounded(dom);
  }
  // A fresh guest connects and passes traffic; the first one never stopped.
  {
    hv::HypervisorOptions fe;
    fe.role = hv::Role::frontend;
    fe.name = "fresh";
    auto hv = std::make_unique<hv::SimHypervisor>(world_->dir(), fe);
    add_device(hv->self());
    ASSERT_FALSE(HasFatalFailure());
    netfront::Netfront nf(*hv, {});
    ASSERT_FALSE(nf.connect(kHangGuard));
    ASSERT_FALSE(wait_backend(hv->self(), XenbusState::connected));
    auto sock = tap_socket(hv->self());
    const auto f = frame(700, 33);
    ASSERT_TRUE(nf.send(f).has_value());
    const auto got = sock.receive(1, kHangGuard);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], f);
    nf.disconnect(kHangGuard);
    remove_device(hv->self());
  }
  expect_good_traffic();
}

TEST_F(HostileFrontend, KillMidTransferRepeatedly) {
  const auto base = resources();
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    auto bad = connected_hostile("churn");
    ASSERT_FALSE(HasFatalFailure());
    const DomId dom = bad->dom();
    auto sock = tap_socket(dom);
    start_transfer(*this, *bad, sock, 100);
    ASSERT_FALSE(HasFatalFailure());
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * i));  // a different moment each time
    bad.reset();
    sock.reset();
    EXPECT_TRUE(wait_for([&] { return !has_vif(dom); }));
    toolstack::delete_vif_nodes(*toolstack_xs_, kDom0, dom, DevId{0});
    // The good guest, on the same event-loop thread, goes on between the deaths.
    expect_good_traffic(8);
  }
  expect_no_leak(base);
}

// ---------------------------------------------------------------------------------------
// Event faults. A lost notification must not lose packets: the requests stay on the ring and
// are served, at the latest, when the backend looks again.

/// Arms `count` lost notifications on every port of `dom` up to kPorts (ports not bound are
/// refused by xensim: harmless).
void drop_events_everywhere(hv::SimHypervisor& dom0, DomId dom, std::uint32_t count) {
  constexpr std::uint32_t kPorts = 64;
  for (std::uint32_t p = 1; p < kPorts; ++p) (void)dom0.inject_drop_events(dom, Port{p}, count);
}

TEST_F(HostileFrontend, EventDrops_LostTxKickDoesNotLosePackets) {
  auto& nf = *good_.netfront;
  const auto f = frame(900, 41);
  // The queue has just worked (a packet out): its housekeeping pass runs for 2 s after that,
  // and finds requests whose kick was lost. (A kick lost on a queue idle for longer waits for
  // the guest's next one, as with Linux netback: an idle queue arms no timer.)
  ASSERT_TRUE(nf.send(f));
  ASSERT_EQ(good_.sock.receive(1, kHangGuard).size(), 1u);
  ASSERT_TRUE(wait_for([&] {
    nf.handle_event();
    nf.process_tx_responses();
    return nf.stats().tx_completed == nf.stats().tx_packets;
  }));
  const auto before = nf.stats();
  drop_events_everywhere(*dom0_, kDom0, 1);  // the backend misses the next kick
  std::size_t sent = 0;
  for (int i = 0; i < 4; ++i)
    if (nf.send(f)) ++sent;
  ASSERT_EQ(sent, 4u);
  // Every packet comes out, bounded in time, though its kick was lost.
  const auto got = good_.sock.receive(4, kHangGuard);
  drop_events_everywhere(*dom0_, kDom0, 0);
  std::size_t same = 0;
  for (const auto& g : got)
    if (g == f) ++same;
  EXPECT_EQ(same, 4u) << "packets whose notification was lost stayed on the ring";
  wait_for([&] {
    nf.handle_event();
    nf.process_tx_responses();
    return nf.stats().tx_completed - before.tx_completed >= 4;
  });
  EXPECT_EQ(nf.stats().tx_completed - before.tx_completed, 4u) << "a TX slot never answered";
  expect_good_traffic();
}

TEST_F(HostileFrontend, EventDrops_LostRxNotificationsDoNotLosePackets) {
  // The backend's notifications to the guest are lost; the guest still finds every packet
  // (it polls), and the RX ring keeps going.
  drop_events_everywhere(*dom0_, good_.dom, 8);
  const auto f = frame(600, 43);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(good_.sock.send(f));
  std::vector<netfront::RxPacket> got;
  wait_for([&] {
    good_.netfront->handle_event();
    (void)good_.netfront->poll(got);
    return got.size() >= 16;
  });
  drop_events_everywhere(*dom0_, good_.dom, 0);
  EXPECT_EQ(got.size(), 16u);
  for (const auto& p : got) EXPECT_EQ(p.bytes, f);
  expect_good_traffic();
}

TEST_F(HostileFrontend, EventDelays_StalledBackendCatchesUpOnRelease) {
  // dom0 stalled: every notification to it is held, then delivered once per port.
  ASSERT_FALSE(dom0_->inject_stall(kDom0, true));
  const auto f = frame(1000, 45);
  std::size_t sent = 0;
  for (int i = 0; i < 32; ++i) {
    if (good_.netfront->send(f)) ++sent;
  }
  const auto in = frame(500, 46);
  const auto rx_before = counter(good_.dom, "rx_packets");
  for (int i = 0; i < 16; ++i) (void)good_.sock.send(in);
  // The stall holds what is sent to dom0, not what dom0 does on its own: the host's frames
  // (read off the TAP, no event needed) reach the guest's ring while the kicks wait.
  EXPECT_TRUE(wait_for([&] { return counter(good_.dom, "rx_packets") - rx_before >= 16; }))
      << "the stalled backend stopped serving the TAP";
  ASSERT_FALSE(dom0_->inject_stall(kDom0, false));
  const auto got = good_.sock.receive(sent, kHangGuard);
  std::size_t same = 0;
  for (const auto& g : got)
    if (g == f) ++same;
  EXPECT_EQ(same, sent);
  std::vector<netfront::RxPacket> rx;
  wait_for([&] {
    good_.netfront->handle_event();
    (void)good_.netfront->poll(rx);
    return rx.size() >= 16;
  });
  EXPECT_EQ(rx.size(), 16u);
  expect_good_traffic();
}

TEST_F(HostileFrontend, EventDrops_HostileGuestRingRecoversAfterLostKicks) {
  // A hostile guest that never kicks again after a lost one: its TX requests must still be
  // served (bounded), and its ring keeps working afterwards.
  auto bad = connected_hostile();
  ASSERT_FALSE(HasFatalFailure());
  auto sock = tap_socket(bad->dom());
  auto page = bad->grant_page(hv::Access::read_only);
  ASSERT_TRUE(page.has_value());
  const auto f = frame(400, 47);
  std::memcpy(page->data, f.data(), f.size());
  std::uint16_t id = 0;
  for (int i = 0; i < 8; ++i)
    bad->tx().put_request(tx_request(page->ref, 0, static_cast<std::uint16_t>(f.size()), id++));
  (void)bad->tx().push_requests();  // published, never notified
  std::vector<wire::TxResponse> rsps;
  EXPECT_TRUE(bad->wait_tx_responses(rsps, 8, kHangGuard))
      << "requests without a kick never served";
  const auto got = sock.receive(8, kHangGuard);
  EXPECT_EQ(got.size(), 8u);
  expect_good_traffic();
}

// ---------------------------------------------------------------------------------------
// Issue 15 #1: the daemon's descriptor table. A guest decides what its connect costs (queues,
// split channels) and retries for free, so running out must fail that connect alone.

/// What netfront writes for `n` queues with split event channels (queue 0 on the rings
/// make_rings() made, the others on fresh pages), then `state` if set.
std::error_code publish_queues(Rogue& bad, std::uint32_t n, std::optional<std::string_view> state) {
  std::map<std::string, std::string> keys{{"multi-queue-num-queues", std::to_string(n)}};
  for (std::uint32_t q = 0; q < n; ++q) {
    GrantRef tx = bad.tx_ring_ref(), rx = bad.rx_ring_ref();
    Port tx_port = bad.port();
    if (q != 0) {
      auto t = bad.grant_page();
      auto r = bad.grant_page();
      auto p = bad.alloc_port(kDom0);
      if (!t || !r || !p) return std::make_error_code(std::errc::no_buffer_space);
      tx = t->ref;
      rx = r->ref;
      tx_port = *p;
    }
    auto rx_port = bad.alloc_port(kDom0);
    if (!rx_port) return rx_port.error();
    const std::string dir = "queue-" + std::to_string(q) + "/";
    keys[dir + "tx-ring-ref"] = std::to_string(tx.value());
    keys[dir + "rx-ring-ref"] = std::to_string(rx.value());
    keys[dir + "event-channel-tx"] = std::to_string(tx_port.value());
    keys[dir + "event-channel-rx"] = std::to_string(rx_port->value());
  }
  return bad.publish(keys, state);
}

/// The daemon keeps no descriptors back from guests: every connect step that takes one
/// (grant-table and event-channel handles, the ports, the domain's memory, TAP queues, the
/// loop's duplicates and epoll) meets a full table somewhere in this loop.
class HostileFdTable : public HostileTest {
 protected:
  std::optional<std::size_t> fd_floor() override { return std::nullopt; }
};

TEST_F(HostileFdTable, ConnectFailingAtEveryDescriptorIsThatVifsErrorOnly) {
  const auto base = resources();
  std::size_t refused = 0, connected = 0;
  for (std::size_t spare = 0; spare <= 24; ++spare) {  // a 2-queue connect takes < 20
    SCOPED_TRACE("descriptors free at connect: " + std::to_string(spare));
    auto bad = hostile();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_FALSE(bad->make_rings());
    ASSERT_FALSE(publish_queues(*bad, 2, std::nullopt));
    std::optional<XenbusState> state;
    {
      const LoweredFdLimit limit(spare);
      ASSERT_TRUE(limit.ok());
      ASSERT_FALSE(bad->set_state(XenbusState::connected));
      ASSERT_TRUE(wait_for([&] {
        state = backend_state(bad->dom());
        return state == XenbusState::connected || state == XenbusState::closing;
      })) << "state "
          << describe(state);
      // The good guest is served while the table is full.
      expect_good_traffic(8);
    }
    if (state == XenbusState::closing) {
      ++refused;
      EXPECT_TRUE(error_node(bad->dom()).has_value());
      EXPECT_EQ(bad->grants_in_use(), 0u) << "a failed connect left grants mapped";
    } else {
      ++connected;
    }
    expect_log_bounded(bad->dom());
    remove_device(bad->dom());
    bad.reset();
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(connected, 0u) << "no shortfall small enough to connect: widen the loop";
  expect_no_leak(base);
  expect_good_traffic();
}

TEST_F(HostileFrontend, FdReserve_ConnectThatWouldTakeTheLastDescriptorsIsRefused) {
  const auto base = resources();
  auto bad = hostile();
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(bad->make_rings());
  ASSERT_FALSE(publish_queues(*bad, 2, std::nullopt));
  {
    // Room for the connect itself, not for it and the control plane's reserve.
    const LoweredFdLimit limit(FdReserve::kDefaultFloor + 8);
    ASSERT_TRUE(limit.ok());
    ASSERT_FALSE(bad->set_state(XenbusState::connected));
    ASSERT_TRUE(wait_for([&] { return backend_state(bad->dom()) == XenbusState::closing; }))
        << "state " << describe(backend_state(bad->dom()));
    const auto err = error_node(bad->dom());
    ASSERT_TRUE(err.has_value());
    EXPECT_TRUE(err->starts_with(std::to_string(EMFILE) + " ")) << *err;
    expect_good_traffic(8);
  }
  EXPECT_EQ(bad->grants_in_use(), 0u);
  // Retrying at will costs the guest nothing and the log little.
  for (int i = 0; i < 20; ++i) {
    const LoweredFdLimit limit(FdReserve::kDefaultFloor + 8);
    ASSERT_FALSE(bad->set_state(XenbusState::initialising));
    ASSERT_FALSE(bad->set_state(XenbusState::connected));
  }
  sync_daemon();  // every retry handled, and logged if it was going to be, before we count
  expect_log_bounded(bad->dom());
  remove_device(bad->dom());
  bad.reset();
  // With descriptors to spare the same layout connects and carries traffic.
  auto ok = hostile("roomy");
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(ok->make_rings());
  ASSERT_FALSE(publish_queues(*ok, 2, "4"));
  ASSERT_FALSE(wait_backend(ok->dom(), XenbusState::connected));
  EXPECT_TRUE(connected(ok->dom()));
  expect_good_traffic();
  remove_device(ok->dom());
  ok.reset();
  expect_no_leak(base);
}

// Issue 15 #11: a guest whose connect fails (a ring it never granted) and that reconnects in
// a loop gets its "cannot connect" line rate-limited like its other lines.
TEST_F(HostileFrontend, FailedConnectLoop_CannotConnectLineIsRateLimited) {
  const auto base = resources();
  // The limiter's windows (10 lines per 5 s) start with the vif: counted from before it, the
  // bound below grows with the time the loop took, which a loaded machine only lengthens.
  const auto start = std::chrono::steady_clock::now();
  auto bad = hostile();
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(bad->make_rings());
  ASSERT_FALSE(bad->publish({{"tx-ring-ref", "4000"}}));
  ASSERT_TRUE(wait_for([&] { return backend_state(bad->dom()) == XenbusState::closing; }));
  int rounds = 0;
  for (; rounds < 60; ++rounds) {
    // netfront's way back: Closed, then Initialising (the backend offers InitWait), then
    // Connected again, which fails the same way.
    ASSERT_FALSE(bad->set_state(XenbusState::closed));
    ASSERT_TRUE(wait_for([&] { return backend_state(bad->dom()) == XenbusState::closed; }))
        << "round " << rounds << ": state " << describe(backend_state(bad->dom()));
    ASSERT_FALSE(bad->set_state(XenbusState::initialising));
    ASSERT_TRUE(wait_for([&] { return backend_state(bad->dom()) == XenbusState::init_wait; }))
        << "round " << rounds << ": state " << describe(backend_state(bad->dom()));
    ASSERT_FALSE(bad->set_state(XenbusState::connected));
    ASSERT_TRUE(wait_for([&] { return backend_state(bad->dom()) == XenbusState::closing; }))
        << "round " << rounds << ": state " << describe(backend_state(bad->dom()));
  }
  std::size_t cannot_connect = 0;
  {
    const std::lock_guard lock(log_mu_);
    const std::string tag = "vif" + std::to_string(bad->dom().value()) + ".";
    for (const auto& l : log_lines_) {
      if (l.find(tag) != std::string::npos && l.find("cannot connect") != std::string::npos)
        ++cannot_connect;
    }
  }
  // log_guest lets 10 lines through per 5 s window (and one more saying how many it hid).
  const auto windows =
      1 + std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
                  .count() /
              5;
  EXPECT_LE(cannot_connect, 11u * static_cast<std::size_t>(windows))
      << "after " << rounds << " failed connects";
  expect_log_bounded(bad->dom());
  expect_good_traffic();
  remove_device(bad->dom());
  bad.reset();
  expect_no_leak(base);
}

// A guest that disconnects and connects again in a loop, on a daemon whose vifs are adoptable
// (a state directory) and whose TAPs' queues go to systemd's fd store: every notification the
// store sends the service manager is counted. systemd compares each fd it is sent with every
// one its store holds, so what each reconnect sends costs PID 1 in proportion to all the vifs.
class HostileReconnect : public HostileTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ubhostile-state-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = std::make_unique<daemon::FdStore>(
        std::vector<std::pair<std::string, UniqueFd>>{},
        [this](const std::string& state, std::span<const int>) {
          (state.starts_with("FDSTOREREMOVE=1") ? removes_ : stores_).fetch_add(1);
          return 1;
        });
    HostileTest::SetUp();
  }
  void TearDown() override {
    HostileTest::TearDown();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path state_dir() override { return dir_; }
  vif::TapKeeper* tap_keeper() override { return store_.get(); }

  std::string dir_;
  std::unique_ptr<daemon::FdStore> store_;
  std::atomic<std::uint64_t> stores_{0}, removes_{0};
};

TEST_F(HostileReconnect, AGuestReconnectingInALoopSendsTheServiceManagerNothing) {
  const auto base = resources();
  const auto stores_before = stores_.load();
  auto bad = connected_hostile();
  ASSERT_FALSE(HasFatalFailure());
  const std::uint64_t queues = tunables().max_queues;  // the TAP has every queue from the start
  ASSERT_EQ(stores_.load() - stores_before, queues) << "the connect keeps each TAP queue once";
  const auto sent_at_connect = stores_.load() + removes_.load();
  constexpr int kCycles = 20;
  for (int i = 0; i < kCycles; ++i) {
    ASSERT_FALSE(bad->set_state(XenbusState::closing));
    ASSERT_FALSE(wait_backend(bad->dom(), XenbusState::closed)) << "cycle " << i;
    ASSERT_FALSE(bad->set_state(XenbusState::closed));
    ASSERT_FALSE(bad->set_state(XenbusState::initialising));
    ASSERT_FALSE(wait_backend(bad->dom(), XenbusState::init_wait)) << "cycle " << i;
    ASSERT_FALSE(bad->publish());
    ASSERT_FALSE(wait_backend(bad->dom(), XenbusState::connected)) << "cycle " << i;
  }
  const auto sent = stores_.load() + removes_.load() - sent_at_connect;
  report_figure("fdstore_notifications_per_guest_reconnect", static_cast<double>(sent) / kCycles,
                "");
  EXPECT_EQ(sent, 0U) << "notifications to the service manager over " << kCycles << " reconnects";
  const auto removes_before = removes_.load();
  remove_device(bad->dom());
  EXPECT_EQ(removes_.load() - removes_before, queues) << "the TAP's removal lets its queues go";
  bad.reset();
  expect_good_traffic();
  expect_no_leak(base);
}

}  // namespace
}  // namespace unetback::hostile_suite
