// BackendXenbus against an in-memory xenstore, driven through the sequences libxl and Linux
// netfront produce (Linux netfront's talk_to_netback, libxl's vif contract; docs/design.md,
// "The xenbus state machine").
#include "backend/xenbus/xenbus_adapter.hpp"

#include <algorithm>
#include <cerrno>
#include <gtest/gtest.h>

#include "tests/support/xenbus_state.hpp"
#include "tests/unit/xenbus/memory_xenstore.hpp"
#include "tests/unit/xenbus/recording_vif.hpp"

namespace unetback::xenbus {
namespace {

using S = XenbusState;

class BackendXenbusTest : public ::testing::Test {
 protected:
  const DomId self_{0};
  const DomId dom_{5};
  const DevId dev_{0};
  const std::string be_ = "/local/domain/0/backend/vif/5/0";
  const std::string fe_ = "/local/domain/5/device/vif/0";

  std::vector<std::string> journal_;
  testing::MemoryXenStore xs_;
  testing::RecordingVif vif_{journal_};
  BackendXenbus backend_{xs_, self_, dom_, dev_, vif_, FeatureOptions{4, true, false}};

  BackendXenbusTest() { xs_.set_journal(&journal_); }

  // Delivers queued watch events until none is left (bounded: a watch storm fails the test).
  void pump() {
    for (int i = 0; i < 10000; ++i) {
      auto ev = xs_.read_watch();
      if (!ev) return;
      if (backend_.owns(*ev)) backend_.handle_watch(*ev);
    }
    FAIL() << "watch events never stopped";
  }

  void write(const std::string& path, const std::string& value) {
    ASSERT_FALSE(xs_.write(path, value));
  }

  // libxl__device_generic_add + libxl__set_xenstore_nic, in one transaction.
  void libxl_add(const std::string& frontend_key = "") {
    ASSERT_FALSE(hv::transact(xs_, [&](hv::XsTx tx) -> std::error_code {
      const std::pair<std::string, std::string> keys[] = {
          {be_ + "/frontend", frontend_key.empty() ? fe_ : frontend_key},
          {be_ + "/frontend-id", "5"},
          {be_ + "/online", "1"},
          {be_ + "/state", "1"},
          {be_ + "/script", "/etc/xen/scripts/vif-bridge"},
          {be_ + "/mac", "00:16:3e:01:02:03"},
          {be_ + "/bridge", "xenbr0"},
          {be_ + "/handle", "0"},
          {be_ + "/type", "vif"},
          {be_ + "/hotplug-status", ""},
          {fe_ + "/backend", be_},
          {fe_ + "/backend-id", "0"},
          {fe_ + "/state", "1"},
          {fe_ + "/handle", "0"},
          {fe_ + "/mac", "00:16:3e:01:02:03"},
          {fe_ + "/trusted", "1"},
          {fe_ + "/mtu", "1500"},
      };
      for (const auto& [k, v] : keys)
        if (auto ec = xs_.write(k, v, tx)) return ec;
      return {};
    }));
    created_at_ = journal_.size();
  }

  // libxl__initiate_device_generic_remove: online=0 and (unless Closed) state=5, one transaction.
  void libxl_remove() {
    ASSERT_FALSE(hv::transact(xs_, [&](hv::XsTx tx) -> std::error_code {
      if (auto ec = xs_.write(be_ + "/online", "0", tx)) return ec;
      auto st = xs_.read(be_ + "/state", tx);
      if (st && *st == "6") return {};
      return xs_.write(be_ + "/state", "5", tx);
    }));
  }

  // What Linux netfront writes in talk_to_netback, then state 4.
  void netfront_connect(unsigned queues = 1, const std::string& num_queues = "") {
    write(fe_ + "/multi-queue-num-queues",
          num_queues.empty() ? std::to_string(queues) : num_queues);
    for (unsigned i = 0; i < queues; ++i) {
      const std::string p = queues == 1 ? fe_ + "/" : fe_ + "/queue-" + std::to_string(i) + "/";
      write(p + "tx-ring-ref", std::to_string(8 + 2 * i));
      write(p + "rx-ring-ref", std::to_string(9 + 2 * i));
      write(p + "event-channel-tx", std::to_string(11 + 2 * i));
      write(p + "event-channel-rx", std::to_string(12 + 2 * i));
    }
    write(fe_ + "/request-rx-copy", "1");
    write(fe_ + "/feature-rx-notify", "1");
    write(fe_ + "/feature-sg", "1");
    write(fe_ + "/feature-gso-tcpv4", "1");
    write(fe_ + "/feature-gso-tcpv6", "1");
    write(fe_ + "/feature-ipv6-csum-offload", "1");
    write(fe_ + "/state", "4");
  }

  std::string read(const std::string& path) {
    auto r = xs_.read(path);
    return r ? *r : std::string("<absent>");
  }
  /// The backend's state node (nullopt: absent, or no valid state in it).
  std::optional<XenbusState> state() { return test::read_state(xs_, be_ + "/state"); }
  std::string error_node() { return read("/local/domain/0/error/backend/vif/5/0/error"); }

  // Position of the first journal entry equal to `entry`; fails if absent.
  std::size_t at(const std::string& entry) {
    auto it = std::find(journal_.begin(), journal_.end(), entry);
    EXPECT_NE(it, journal_.end()) << "journal lacks: " << entry;
    return static_cast<std::size_t>(it - journal_.begin());
  }
  std::size_t count(const std::string& entry) {
    return static_cast<std::size_t>(std::count(journal_.begin(), journal_.end(), entry));
  }
  // The sequence of values written to B:state after libxl's initial 1 (libxl's later 5
  // included: it is part of what the frontend sees).
  std::vector<XenbusState> state_writes() {
    std::vector<XenbusState> out;
    const std::string prefix = "write " + be_ + "/state=";
    for (std::size_t i = created_at_; i < journal_.size(); ++i) {
      if (journal_[i].rfind(prefix, 0) != 0) continue;
      // Not a state at all: unknown (0), which no backend writes after its initial 1.
      out.push_back(xenbus::parse_xenbus_state(journal_[i].substr(prefix.size()))
                        .value_or(XenbusState::unknown));
    }
    return out;
  }
  std::size_t created_at_ = 0;

  // A frontend answering our Closing with Closed, then starting over (Initialising): the
  // backend offers InitWait again.
  void frontend_starts_over() {
    write(fe_ + "/state", "6");
    pump();
    write(fe_ + "/state", "1");
    pump();
    EXPECT_EQ(state(), XenbusState::init_wait);
  }

  void bring_up() {
    ASSERT_FALSE(backend_.start());
    libxl_add();
    pump();
    ASSERT_EQ(state(), XenbusState::init_wait);
    write(be_ + "/hotplug-status", "connected");
    netfront_connect();
    pump();
    ASSERT_EQ(state(), XenbusState::connected);
  }
};

TEST_F(BackendXenbusTest, LibxlCreateNetfrontConnectThenLibxlDestroy) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();

  // Probe: TAP and features before InitWait (libxl's hotplug script runs on InitWait).
  EXPECT_EQ(state(), XenbusState::init_wait);
  EXPECT_EQ(vif_.tap, "vif5.0");
  const std::size_t init_wait = at("write " + be_ + "/state=2");
  EXPECT_LT(at("create_tap vif5.0"), init_wait);
  for (const char* f : {"feature-sg=1", "feature-gso-tcpv4=1", "feature-gso-tcpv6=1",
                        "feature-ipv6-csum-offload=1", "feature-rx-copy=1", "feature-rx-flip=0",
                        "feature-multicast-control=1", "feature-dynamic-multicast-control=1",
                        "feature-split-event-channels=1", "multi-queue-max-queues=4"}) {
    EXPECT_LT(at("write " + be_ + "/" + f), init_wait) << f;
  }

  // netfront sees InitWait, writes its keys and goes straight to 4.
  netfront_connect();
  pump();
  ASSERT_TRUE(vif_.connected.has_value());
  EXPECT_EQ(vif_.connected->queues.size(), 1U);
  EXPECT_TRUE(vif_.connected->queues[0].split_event_channels());
  EXPECT_EQ(state(), XenbusState::init_wait) << "Connected must wait for hotplug-status";

  // The hotplug script bridges the TAP and reports.
  write(be_ + "/hotplug-status", "connected");
  pump();
  EXPECT_EQ(state(), XenbusState::connected);

  // xl destroy.
  libxl_remove();
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_FALSE(vif_.tap.has_value());
  EXPECT_FALSE(xs_.exists(be_ + "/hotplug-status"));
  const std::size_t closed = at("write " + be_ + "/state=6");
  EXPECT_LT(at("disconnect"), at("destroy_tap"));
  EXPECT_LT(at("destroy_tap"), closed);
  EXPECT_EQ(state_writes(),
            (std::vector<XenbusState>{XenbusState::init_wait, XenbusState::connected,
                                      XenbusState::closing, XenbusState::closed}));
  EXPECT_TRUE(backend_.finished());
  EXPECT_EQ(error_node(), "<absent>");

  // libxl then deletes the directories; nothing more happens.
  ASSERT_FALSE(xs_.rm(fe_));
  ASSERT_FALSE(xs_.rm(be_));
  const std::size_t before = journal_.size();
  pump();
  EXPECT_EQ(journal_.size(), before);
  EXPECT_EQ(xs_.watch_count(), 3U) << "frontend watch dropped after removal";
}

// A daemon restarted under a running guest: the device is at 4 with the old daemon's
// hotplug-status=connected, the frontend still Connected to rings nobody serves.
TEST_F(BackendXenbusTest, AdoptingACrashedDaemonsDeviceClosesItThenServesTheFrontendAfresh) {
  libxl_add();
  write(be_ + "/state", "4");
  write(be_ + "/hotplug-status", "connected");
  netfront_connect();
  created_at_ = journal_.size();
  int hotplug_runs = 0;
  backend_.set_hotplug_runner([&] {
    ++hotplug_runs;
    journal_.push_back("run_hotplug");
  });
  ASSERT_FALSE(backend_.start());
  ASSERT_FALSE(backend_.adopt());
  pump();
  // Closing then Closed, the old script's verdict dropped, a new TAP, the script run again.
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_EQ(state_writes(), (std::vector<XenbusState>{XenbusState::closing, XenbusState::closed}));
  EXPECT_LT(at("rm " + be_ + "/hotplug-status"), at("create_tap vif5.0"));
  EXPECT_LT(at("create_tap vif5.0"), at("run_hotplug"));
  EXPECT_EQ(hotplug_runs, 1);
  EXPECT_FALSE(vif_.connected.has_value()) << "the stale Connected must not map the old rings";

  // The frontend saw Closing: it closes and starts over; the script reports meanwhile.
  write(fe_ + "/state", "5");
  write(fe_ + "/state", "6");
  pump();
  write(be_ + "/hotplug-status", "connected");
  write(fe_ + "/state", "1");
  pump();
  EXPECT_EQ(state(), XenbusState::init_wait);
  netfront_connect();
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  ASSERT_TRUE(vif_.connected.has_value());
  EXPECT_EQ(count("create_tap vif5.0"), 1U);
}

// A planned takeover (issue 20): the daemon that connected the device kept the keys its connect
// was read from (in the vif's state record); its successor reads the device from them. Only
// the three states that say both ends are still Connected are xenstore round trips, so the
// guest's gap has no read per key. The watches set up afterwards re-read what may change.
TEST_F(BackendXenbusTest, ATakeoverReadsTheDeviceFromTheKeysItsConnectWasMadeFrom) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-status", "connected");
  pump();
  netfront_connect(2);
  pump();
  ASSERT_EQ(state(), XenbusState::connected);
  const KeySnapshot kept = vif_.remembered;
  EXPECT_EQ(snapshot_lookup(kept, fe_ + "/queue-1/tx-ring-ref"), std::optional<std::string>("10"));
  EXPECT_EQ(snapshot_lookup(kept, be_ + "/mac"), std::optional<std::string>("00:16:3e:01:02:03"));
  EXPECT_TRUE(std::any_of(kept.begin(), kept.end(), [](const auto& k) { return !k.second; }))
      << "a key read as absent is remembered as absent";
  // The record holds them in its bytes.
  EXPECT_EQ(decode_key_snapshot(encode_key_snapshot(kept, std::size_t{64} * 1024)), kept);
  // The daemon hands over and exits: its watches go with its connection.
  xs_.forget_watches();

  const auto adopt_with = [&](std::optional<KeySnapshot> keys, std::size_t& reads) {
    testing::RecordingVif next{journal_};
    next.adopt_error = {};
    next.handed_over = std::move(keys);
    BackendXenbus successor{xs_, self_, dom_, dev_, next, FeatureOptions{4, true, false}};
    EXPECT_FALSE(successor.start());
    const std::size_t before = xs_.reads();
    EXPECT_FALSE(successor.adopt());
    reads = xs_.reads() - before;
    xs_.forget_watches();
    EXPECT_TRUE(next.connected.has_value());
    return next.connected.value_or(FrontendConfig{});
  };
  std::size_t taken_over_reads = 0, recovered_reads = 0;
  const FrontendConfig taken = adopt_with(kept, taken_over_reads);
  ASSERT_EQ(taken.queues.size(), 2U);
  EXPECT_EQ(taken.queues[1].tx_ring_ref.value(), 10U);
  EXPECT_EQ(taken_over_reads, 3U) << "backend state and online, frontend state";
  // After a crash nothing was handed over: every key is read again.
  (void)adopt_with(std::nullopt, recovered_reads);
  EXPECT_GT(recovered_reads, 20U);
}

TEST_F(BackendXenbusTest, AdoptingNeedsADeviceAnEarlierBackendMovedPastInitialising) {
  libxl_add();  // state 1: a new device, libxl's to probe
  ASSERT_FALSE(backend_.start());
  EXPECT_TRUE(backend_.adopt());
  pump();
  EXPECT_EQ(state(), XenbusState::init_wait) << "probed as a new device instead";
}

TEST_F(BackendXenbusTest, AdoptingRefusesADeviceWhoseFrontendKeyPointsElsewhere) {
  libxl_add("/local/domain/6/device/vif/0");
  write(be_ + "/state", "4");
  ASSERT_FALSE(backend_.start());
  EXPECT_TRUE(backend_.adopt());
  pump();
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_NE(error_node(), "<absent>");
  EXPECT_FALSE(vif_.tap.has_value());
}

TEST_F(BackendXenbusTest, HotplugStatusBeforeTheFrontendConnects) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-status", "connected");
  pump();
  EXPECT_EQ(state(), XenbusState::init_wait);
  netfront_connect();
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  EXPECT_EQ(vif_.connect_calls, 1);
}

TEST_F(BackendXenbusTest, FrontendClosesAndReconnectsKeepingTheTap) {
  bring_up();
  write(fe_ + "/state", "5");
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_TRUE(vif_.tap.has_value());
  write(fe_ + "/state", "6");
  pump();
  // Guest reboot / driver reload.
  write(fe_ + "/state", "1");
  pump();
  EXPECT_EQ(state(), XenbusState::init_wait);
  netfront_connect();
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  EXPECT_EQ(vif_.connect_calls, 2);
  EXPECT_EQ(count("create_tap vif5.0"), 1U);
  EXPECT_EQ(state_writes(),
            (std::vector<XenbusState>{XenbusState::init_wait, XenbusState::connected,
                                      XenbusState::closing, XenbusState::closed,
                                      XenbusState::init_wait, XenbusState::connected}));
}

TEST_F(BackendXenbusTest, MultiQueueFrontend) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-status", "connected");
  netfront_connect(4);
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  ASSERT_TRUE(vif_.connected.has_value());
  ASSERT_EQ(vif_.connected->queues.size(), 4U);
  EXPECT_EQ(vif_.connected->queues[3].tx_ring_ref, GrantRef{14});
}

class HostileQueueCount : public BackendXenbusTest,
                          public ::testing::WithParamInterface<const char*> {};

TEST_P(HostileQueueCount, IsFatalForThatVif) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-status", "connected");
  netfront_connect(1, GetParam());
  pump();
  EXPECT_EQ(vif_.connect_calls, 0);
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_EQ(error_node().rfind("22 reading " + fe_ + "/multi-queue-num-queues: ", 0), 0U)
      << error_node();
  // netfront answers Closing with Closed; we follow, keeping the TAP for a retry.
  write(fe_ + "/state", "6");
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_TRUE(vif_.tap.has_value());
}

INSTANTIATE_TEST_SUITE_P(BackendXenbus, HostileQueueCount,
                         ::testing::Values("0", "1000000000", "5", "-1", "1 ", "x"));

TEST_F(BackendXenbusTest, MissingRequestRxCopyIsFatal) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(fe_ + "/tx-ring-ref", "8");
  write(fe_ + "/rx-ring-ref", "9");
  write(fe_ + "/event-channel", "3");
  write(fe_ + "/state", "4");
  pump();
  EXPECT_EQ(vif_.connect_calls, 0);
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_EQ(error_node(), std::to_string(EOPNOTSUPP) + " reading " + fe_ +
                              "/request-rx-copy: frontend does not support rx-copy");
}

TEST_F(BackendXenbusTest, FrontendKeyPointingAtAnotherDomainIsRefused) {
  ASSERT_FALSE(backend_.start());
  libxl_add("/local/domain/7/device/vif/0");
  pump();
  EXPECT_FALSE(vif_.tap.has_value());
  EXPECT_EQ(count("create_tap vif5.0"), 0U);
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_NE(error_node().find("frontend"), std::string::npos) << error_node();
  EXPECT_EQ(xs_.watch_count(), 3U) << "must not watch the other domain's directory";
  // libxl gives up waiting for InitWait and removes the device: we answer Closed.
  libxl_remove();
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
}

TEST_F(BackendXenbusTest, TapCreationFailureNeverWritesInitWait) {
  vif_.create_tap_error = std::make_error_code(std::errc::operation_not_permitted);
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  EXPECT_EQ(state_writes(), (std::vector<XenbusState>{XenbusState::closing}));
  EXPECT_EQ(error_node().rfind(std::to_string(EPERM) + " creating vif5.0", 0), 0U) << error_node();
  libxl_remove();
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_EQ(count("destroy_tap"), 0U);
}

TEST_F(BackendXenbusTest, VifConnectFailureIsFatal) {
  vif_.connect_error = std::make_error_code(std::errc::io_error);
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-status", "connected");
  netfront_connect();
  pump();
  EXPECT_EQ(vif_.connect_calls, 1);
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_EQ(error_node().rfind(std::to_string(EIO) + " connecting 1 queue(s)", 0), 0U)
      << error_node();
}

TEST_F(BackendXenbusTest, GarbageFrontendStateIsFatal) {
  bring_up();
  write(fe_ + "/state", "banana");
  pump();
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_EQ(error_node(), "22 saw an invalid state at frontend");
  // A well-behaved restart afterwards still works.
  frontend_starts_over();
}

TEST_F(BackendXenbusTest, FrontendDirectoryVanishingTearsDown) {
  bring_up();
  ASSERT_FALSE(xs_.rm(fe_));
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_FALSE(vif_.tap.has_value());
  EXPECT_TRUE(backend_.finished());
}

TEST_F(BackendXenbusTest, FrontendDomainGoneTearsDown) {
  bring_up();
  backend_.frontend_domain_gone();
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_FALSE(vif_.tap.has_value());
}

TEST_F(BackendXenbusTest, DaemonShutdownClosesAndStopsListening) {
  bring_up();
  backend_.shutdown();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_FALSE(vif_.tap.has_value());
  const std::size_t before = journal_.size();
  write(fe_ + "/state", "1");
  const std::size_t after_write = journal_.size();
  pump();
  EXPECT_EQ(journal_.size(), after_write);
  EXPECT_EQ(after_write, before + 1);
}

TEST_F(BackendXenbusTest, DaemonStartedAfterTheFrontendConnected) {
  libxl_add();
  write(be_ + "/hotplug-status", "connected");
  netfront_connect();
  ASSERT_FALSE(backend_.start());
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  EXPECT_EQ(vif_.connect_calls, 1);
}

TEST_F(BackendXenbusTest, RateIsReadAtConnectAndWatched) {
  write(be_ + "/rate", "1250000,50000");
  bring_up();
  EXPECT_EQ(vif_.rate, (Rate{1250000, 50000}));
  EXPECT_EQ(count("rate_changed"), 0U) << "the watch's initial event is not a change";
  write(be_ + "/rate", "100,1000");
  pump();
  EXPECT_EQ(vif_.rate, (Rate{100, 1000}));
  write(be_ + "/rate", "10Mb/s@50ms");
  pump();
  EXPECT_TRUE(vif_.rate->unlimited()) << "a malformed rate means unlimited, as Linux";
}

TEST_F(BackendXenbusTest, RateOfZeroBytesPerIntervalMeansUnlimited) {
  // xl's rounding of 1Mb/s@1us: Linux would take it and never send again; we log it and go
  // unlimited, as Linux does for a rate it cannot parse.
  write(be_ + "/rate", "0,1");
  bring_up();
  ASSERT_TRUE(vif_.rate.has_value());
  EXPECT_TRUE(vif_.rate->unlimited());
  write(be_ + "/rate", "1,1");
  pump();
  EXPECT_EQ(vif_.rate, (Rate{1, 1}));
  write(be_ + "/rate", "0,50000");
  pump();
  EXPECT_TRUE(vif_.rate->unlimited());
}

TEST_F(BackendXenbusTest, MacSpoofingKeyIsWatchedWhileConnectedAndBadValuesAreKept) {
  bring_up();
  EXPECT_EQ(count("mac_spoofing 1") + count("mac_spoofing 0"), 0U)
      << "the watch's initial event is not a change";
  write(be_ + "/unetback-allow-mac-spoofing", "1");
  pump();
  EXPECT_EQ(vif_.mac_spoofing, true);
  write(be_ + "/unetback-allow-mac-spoofing", "junk");
  pump();
  EXPECT_EQ(vif_.mac_spoofing, true) << "a bad value keeps the previous one";
  write(be_ + "/unetback-allow-mac-spoofing", "0");
  pump();
  EXPECT_EQ(vif_.mac_spoofing, false);
}

TEST_F(BackendXenbusTest, XdpHeadroomIsReadAtConnect) {
  write(fe_ + "/xdp-headroom", "256");  // Linux netfront writes it just before its connect keys
  bring_up();
  EXPECT_EQ(read(be_ + "/feature-xdp-headroom"), "1");
  EXPECT_EQ(vif_.connected->xdp_headroom, 256U);
}

// Linux netfront's xennet_xdp_set when a program is attached, then detached: 7 and the key
// (here both land before the watch fires), wait for 8, then 4. The rings stay mapped.
TEST_F(BackendXenbusTest, NetfrontAttachingXdpPassesReconfiguredAndTheQueuesGetTheHeadroom) {
  bring_up();
  const int connects = vif_.connect_calls;
  for (const char* headroom : {"256", "0"}) {
    write(fe_ + "/state", "7");
    write(fe_ + "/xdp-headroom", headroom);
    pump();
    EXPECT_EQ(state(), XenbusState::reconfigured) << headroom;
    EXPECT_EQ(vif_.xdp_headroom, std::stoul(headroom));
    write(fe_ + "/state", "4");
    pump();
    EXPECT_EQ(state(), XenbusState::connected) << headroom;
  }
  EXPECT_EQ(vif_.connect_calls, connects) << "never reconnected";
  EXPECT_EQ(count("disconnect"), 0U);
  EXPECT_EQ(count("xdp_headroom 256"), 1U) << "the re-read on the way back is no news";
  EXPECT_EQ(state_writes(),
            (std::vector<XenbusState>{XenbusState::init_wait, XenbusState::connected,
                                      XenbusState::reconfigured, XenbusState::connected,
                                      XenbusState::reconfigured, XenbusState::connected}));
}

// Linux netfront writes the key after its 7: a backend that reads on 7 may see the old value.
// The read on the way back to 4 picks the new one up.
TEST_F(BackendXenbusTest, AHeadroomWrittenAfterReconfiguringIsPickedUpOnTheWayBackToConnected) {
  bring_up();
  write(fe_ + "/state", "7");
  pump();
  EXPECT_EQ(state(), XenbusState::reconfigured);
  EXPECT_FALSE(vif_.xdp_headroom.has_value()) << "still the connect's 0: no news";
  write(fe_ + "/xdp-headroom", "256");
  pump();
  write(fe_ + "/state", "4");
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  EXPECT_EQ(vif_.xdp_headroom, 256U);
}

class HostileXdpHeadroom : public BackendXenbusTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(HostileXdpHeadroom, WhileReconfiguringIsFatalForThatVifWhichMayStartOver) {
  bring_up();
  write(fe_ + "/state", "7");
  write(fe_ + "/xdp-headroom", GetParam());
  pump();
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_EQ(error_node().rfind("22 reading " + fe_ + "/xdp-headroom: ", 0), 0U) << error_node();
  EXPECT_FALSE(vif_.xdp_headroom.has_value()) << "never handed to the queues";
  // The frontend may start over, with a value we can honour.
  write(fe_ + "/xdp-headroom", "256");
  frontend_starts_over();
  netfront_connect();
  pump();
  EXPECT_EQ(state(), XenbusState::connected);
  EXPECT_EQ(vif_.connected->xdp_headroom, 256U);
}

TEST_P(HostileXdpHeadroom, AtConnectIsFatalForThatVif) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-status", "connected");
  write(fe_ + "/xdp-headroom", GetParam());
  netfront_connect();
  pump();
  EXPECT_EQ(vif_.connect_calls, 0);
  EXPECT_EQ(state(), XenbusState::closing);
  EXPECT_EQ(error_node().rfind("22 reading " + fe_ + "/xdp-headroom: ", 0), 0U) << error_node();
}

INSTANTIATE_TEST_SUITE_P(BackendXenbus, HostileXdpHeadroom,
                         ::testing::Values("32768", "4096", "65536", "-1", "256 ", "banana"));

TEST_F(BackendXenbusTest, MulticastControlIsWatchedWhileConnected) {
  bring_up();
  EXPECT_FALSE(vif_.connected->multicast_control);
  write(fe_ + "/request-multicast-control", "1");
  pump();
  EXPECT_EQ(vif_.multicast_control, true);
  write(fe_ + "/request-multicast-control", "junk");
  pump();
  EXPECT_EQ(vif_.multicast_control, false);
}

TEST_F(BackendXenbusTest, HotplugErrorNeverConnects) {
  ASSERT_FALSE(backend_.start());
  libxl_add();
  pump();
  write(be_ + "/hotplug-error", "vif-bridge: bridge xenbr0 does not exist");
  write(be_ + "/hotplug-status", "error");
  netfront_connect();
  pump();
  EXPECT_EQ(state(), XenbusState::init_wait);
  libxl_remove();
  pump();
  EXPECT_EQ(state(), XenbusState::closed);
  EXPECT_FALSE(vif_.tap.has_value());
}

TEST_F(BackendXenbusTest, IgnoresOtherVifsWatchEvents) {
  EXPECT_FALSE(
      backend_.owns({be_ + "/state", BackendXenbus::token_prefix(dom_, DevId{1}) + "state"}));
  EXPECT_TRUE(backend_.owns({be_ + "/state", BackendXenbus::token_prefix(dom_, dev_) + "state"}));
}

}  // namespace
}  // namespace unetback::xenbus
