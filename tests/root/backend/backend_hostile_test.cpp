// A guest that breaks the rules: the backend answers with errors or disables that guest's
// vif, and the other guests' traffic goes on (the advisory table in docs/security.md; the full
// hostile suite is issue 9's).
#include <filesystem>

#include "backend/vif/vif_record.hpp"
#include "tests/root/backend/backend_fixture.hpp"

namespace unetback::test {
namespace {

/// The guest's TX ring page, mapped by a dom0 handle of the test's own: what a guest can
/// write into its shared ring at any time.
struct MappedTxRing {
  std::unique_ptr<hv::GrantTable> table;
  hv::MappedGrants page;
  ring::SharedRingHeader* header() const {
    return reinterpret_cast<ring::SharedRingHeader*>(page.data());
  }
};

MappedTxRing map_tx_ring(hv::SimHypervisor& dom0, hv::XenStore& xs, const Guest& g) {
  MappedTxRing m;
  m.table = dom0.open_grant_table();
  const auto ref = xs.read(toolstack::frontend_path(g.dom, DevId{0}) + "/tx-ring-ref");
  EXPECT_TRUE(ref.has_value());
  const GrantRef refs[] = {GrantRef{static_cast<std::uint32_t>(std::stoul(*ref))}};
  auto page = m.table->map(g.dom, refs, hv::Access::read_write);
  EXPECT_TRUE(page.has_value());
  if (page) m.page = std::move(*page);
  return m;
}

TEST_F(BackendEndToEnd, ImpossibleRequestIndicesDisableThatVifOnly) {
  Guest& bad = guest(0);
  Guest& good = new_guest();
  bring_up(bad);
  bring_up(good);

  // Hold the backend's notifications, let the guest post a request, then push req_prod far
  // past anything the ring can hold (RING_REQUEST_PROD_OVERFLOW) before the backend looks.
  ASSERT_FALSE(dom0_->inject_stall(kDom0, true));
  ASSERT_TRUE(bad.netfront->send(tcp_frame(100, 1)).has_value());
  auto ring = map_tx_ring(*dom0_, *toolstack_xs_, bad);
  ring.header()->req_prod = ring.header()->rsp_prod + 1000;
  ASSERT_FALSE(dom0_->inject_stall(kDom0, false));

  ASSERT_TRUE(wait_for([&] { return bad.vif->disabled(); }));
  EXPECT_EQ(counter(bad, "tx_fatal"), 1u);
  // The daemon reports a data-path fatal through xenbus (from its own thread): error node,
  // then Closing.
  {
    const std::lock_guard lock(mu_);
    bad.xenbus->fatal_from_datapath(EIO, bad.vif->disabled_reason());
  }
  EXPECT_FALSE(wait_state(bad, XenbusState::closing));
  const auto err = toolstack_xs_->read("/local/domain/0/error/backend/vif/" +
                                       std::to_string(bad.dom.value()) + "/0/error");
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("data path"), std::string::npos) << *err;

  // The other guest is untouched, both ways.
  const auto out = tcp_frame(1400, 2);
  ASSERT_TRUE(good.netfront->send(out).has_value());
  EXPECT_EQ(host_receive(good).size(), out.size());
  const auto in = tcp_frame(1400, 3);
  host_send(good, in);
  auto pkt = guest_receive(good);
  ASSERT_TRUE(pkt.has_value());
  EXPECT_EQ(pkt->bytes.size(), in.size());
  EXPECT_FALSE(good.vif->disabled());
}

TEST_F(BackendEndToEnd, RevokedGrantsGetErrorResponsesAndTheVifStaysUp) {
  Guest& g = guest();
  bring_up(g);
  // Revoke every grant of the guest except its two ring pages: its RX buffers and TX
  // pages are gone under the backend's feet (what a guest may do at any time).
  const std::string fe = toolstack::frontend_path(g.dom, DevId{0});
  const auto tx_ref = std::stoul(*toolstack_xs_->read(fe + "/tx-ring-ref"));
  const auto rx_ref = std::stoul(*toolstack_xs_->read(fe + "/rx-ring-ref"));
  for (std::uint32_t ref = 0; ref < 4096; ++ref)
    if (ref != tx_ref && ref != rx_ref) (void)dom0_->inject_revoke_grant(g.dom, GrantRef{ref});

  const auto bad_slots_before = g.netfront->stats().rx_dropped(netfront::RxDrop::bad_slot);
  host_send(g, tcp_frame(1400, 5));  // host -> guest: the copy into the guest fails
  EXPECT_TRUE(wait_for([&] { return counter(g, "rx_copy_errors") > 0; }));
  // The guest takes the errored slot and drops it (counted), delivering nothing.
  std::vector<netfront::RxPacket> delivered;
  EXPECT_TRUE(wait_for([&] {
    g.netfront->handle_event();
    (void)g.netfront->poll(delivered);
    return g.netfront->stats().rx_dropped(netfront::RxDrop::bad_slot) > bad_slots_before;
  })) << "the guest never saw the errored slot";
  EXPECT_TRUE(delivered.empty()) << "a packet whose copy failed reached the guest";

  ASSERT_TRUE(g.netfront->send(tcp_frame(1400, 6)).has_value());  // guest -> host
  ASSERT_TRUE(guest_settle_all(g)) << "the packet was never answered";
  EXPECT_GE(g.netfront->stats().tx_error_responses, 1u);
  // Answered ERROR, counted dropped, and not counted sent to the TAP (a report waits for the
  // pass in progress: the one that answered it is over).
  EXPECT_EQ(counter(g, "tx_drop_copy_error"), 1u);
  EXPECT_EQ(counter(g, "tx_packets"), 0u) << "a packet whose copy failed went out";
  EXPECT_FALSE(g.vif->disabled());
  EXPECT_EQ(read_state(*toolstack_xs_, g.be_path() + "/state"), XenbusState::connected)
      << "still Connected";
}

TEST_F(BackendEndToEnd, GuestThatStopsPostingBuffersLosesCarrierAndGetsItBack) {
  vif::Tunables t;
  t.rx_stall_timeout_ms = 200;
  Guest& g = guest();
  bring_up(g, 1500, {}, t);
  // Fill the guest's RX ring without the guest taking anything.
  const auto frame = tcp_frame(1400, 7);
  for (int i = 0; i < 300; ++i) host_send(g, frame);
  EXPECT_TRUE(wait_for([&] { return !g.vif->report().carrier; })) << "carrier never went off";
  EXPECT_GE(counter(g, "rx_stalls"), 1u);
  // The guest drains its ring and posts buffers again: carrier back.
  std::vector<netfront::RxPacket> got;
  const auto until = std::chrono::steady_clock::now() + kHangGuard;
  while (!g.vif->report().carrier && std::chrono::steady_clock::now() < until) {
    g.netfront->handle_event();
    (void)g.netfront->poll(got);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(g.vif->report().carrier);
  EXPECT_GT(got.size(), 0u);
}

// A state record names its TAP by ifindex, which the kernel hands out again once the TAP is
// gone. Releasing a record left behind by a guest that went while no daemon ran removes the
// TAP at that ifindex only if it is still the vif's (its ifalias says so): another program's
// persistent TAP there stays. The record goes either way.
TEST(LeftBehindRecords, ReleasingOneRemovesItsVifsTapButNeverAnotherProgramsTap) {
  if (!enter_private_netns()) GTEST_SKIP() << "needs root and /dev/net/tun (suite root-netns)";
  const std::string root = "/local/domain/0/backend/vif";
  const auto persistent_tap = [](const std::string& name, const std::string& alias) {
    net::TapConfig cfg;
    cfg.name = name;
    cfg.vnet_hdr = true;
    cfg.multi_queue = true;
    auto tap = net::TapDevice::create(cfg);
    EXPECT_TRUE(tap) << name;
    if (!tap) return 0;
    EXPECT_FALSE(tap->set_persistent(true));
    if (!alias.empty()) EXPECT_FALSE(tap->set_alias(alias));
    tap->keep_for_successor();
    return tap->ifindex();  // closed here: the TAP stays, as a dead daemon's does
  };
  const int foreign = persistent_tap("other0", "made by another program");
  const int ours = persistent_tap("vif7.1", vif::tap_alias(root + "/7/1"));
  ASSERT_GT(foreign, 0);
  ASSERT_GT(ours, 0);
  char tmpl[] = "/tmp/unetback-left-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(tmpl);
  ASSERT_TRUE(vif::VifRecord::create(vif::VifRecord::path_for(dir, DomId{7}, DevId{0}), DomId{7},
                                     DevId{0}, 1, foreign));
  ASSERT_TRUE(vif::VifRecord::create(vif::VifRecord::path_for(dir, DomId{7}, DevId{1}), DomId{7},
                                     DevId{1}, 1, ours));
  EXPECT_EQ(vif::release_left_behind(dir, root, [](DomId, DevId) { return false; }), 2U);
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "both records are released";
  EXPECT_EQ(::if_nametoindex("other0"), static_cast<unsigned>(foreign)) << "not the vif's TAP";
  EXPECT_EQ(::if_nametoindex("vif7.1"), 0U) << "the vif's own TAP is removed";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unetback::test
