// BackendManager against an in-memory xenstore and a recording VifFactory, driven through
// what libxl, netfront and a dying domain produce (libxl's vif contract, as the real-Xen lab
// observed it).
#include "backend/daemon/backend_manager.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <set>

#include "tests/support/xenbus_state.hpp"
#include "tests/unit/daemon/fake_vif_factory.hpp"
#include "tests/unit/daemon/special_watch_xenstore.hpp"

namespace unetback::daemon {
namespace {

using xenbus::XenbusState;

class BackendManagerTest : public ::testing::Test {
 protected:
  testing::SpecialWatchXenStore xs_;
  testing::FakeVifFactory factory_;
  std::set<std::uint16_t> alive_{5, 6, 7};
  TunableStore tunables_{xs_, DomId{0}, vif::Tunables{}};
  BackendManager manager_{xs_, DomId{0}, factory_, tunables_,
                          [this](DomId d) { return alive_.count(d.value()) > 0; }};

  static std::string be(int dom, int dev) {
    return "/local/domain/0/backend/vif/" + std::to_string(dom) + "/" + std::to_string(dev);
  }
  static std::string fe(int dom, int dev) {
    return "/local/domain/" + std::to_string(dom) + "/device/vif/" + std::to_string(dev);
  }

  void pump() {
    for (int i = 0; i < 100; ++i)
      if (!manager_.process_events()) return;
    FAIL() << "watch events never stopped";
  }
  void write(const std::string& p, const std::string& v) { ASSERT_FALSE(xs_.write(p, v)); }
  std::string read(const std::string& p) {
    auto r = xs_.read(p);
    return r ? *r : "<absent>";
  }

  // libxl__device_generic_add + libxl__set_xenstore_nic, in one transaction.
  void libxl_add(int dom, int dev) {
    ASSERT_FALSE(hv::transact(xs_, [&](hv::XsTx tx) -> std::error_code {
      const std::string b = be(dom, dev), f = fe(dom, dev);
      const std::pair<std::string, std::string> keys[] = {
          {b + "/frontend", f},
          {b + "/frontend-id", std::to_string(dom)},
          {b + "/online", "1"},
          {b + "/state", "1"},
          {b + "/script", "/etc/xen/scripts/vif-bridge"},
          {b + "/mac", "00:16:3e:01:02:03"},
          {b + "/bridge", "xenbr0"},
          {b + "/handle", std::to_string(dev)},
          {b + "/type", "vif"},
          {b + "/hotplug-status", ""},
          {f + "/backend", b},
          {f + "/backend-id", "0"},
          {f + "/state", "1"},
          {f + "/handle", std::to_string(dev)},
          {f + "/mac", "00:16:3e:01:02:03"},
          {f + "/trusted", "1"},
          {f + "/mtu", "1500"},
      };
      for (const auto& [k, v] : keys)
        if (auto ec = xs_.write(k, v, tx)) return ec;
      return {};
    }));
  }
  void libxl_remove(int dom, int dev) {
    ASSERT_FALSE(hv::transact(xs_, [&](hv::XsTx tx) -> std::error_code {
      if (auto ec = xs_.write(be(dom, dev) + "/online", "0", tx)) return ec;
      return xs_.write(be(dom, dev) + "/state", "5", tx);
    }));
  }
  void netfront_connect(int dom, int dev) {
    const std::string f = fe(dom, dev);
    write(f + "/tx-ring-ref", "8");
    write(f + "/rx-ring-ref", "9");
    write(f + "/event-channel-tx", "11");
    write(f + "/event-channel-rx", "12");
    write(f + "/request-rx-copy", "1");
    write(f + "/state", "4");
  }
  void bring_up(int dom, int dev) {
    libxl_add(dom, dev);
    pump();
    ASSERT_EQ(test::read_state(xs_, be(dom, dev) + "/state"), XenbusState::init_wait);
    write(be(dom, dev) + "/hotplug-status", "connected");
    netfront_connect(dom, dev);
    pump();
    ASSERT_EQ(test::read_state(xs_, be(dom, dev) + "/state"), XenbusState::connected);
  }

  void SetUp() override {
    ASSERT_FALSE(manager_.start());
    pump();
  }
};

TEST_F(BackendManagerTest, NewBackendDirectoryGetsAVifThatReachesInitWait) {
  libxl_add(5, 0);
  pump();
  ASSERT_EQ(manager_.vif_count(), 1U);
  testing::FakeVif* vif = factory_.find(DomId{5}, DevId{0});
  ASSERT_NE(vif, nullptr);
  EXPECT_EQ(vif->tap, "vif5.0");
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::init_wait);
  EXPECT_EQ(read(be(5, 0) + "/feature-rx-copy"), "1");
  EXPECT_EQ(read(be(5, 0) + "/multi-queue-max-queues"), "4") << "from the max-queues tunable";
  EXPECT_EQ(read(be(5, 0) + "/feature-split-event-channels"), "1");
  EXPECT_EQ(read(be(5, 0) + "/feature-ctrl-ring"), "1") << "the vif layer serves the control ring";
  EXPECT_EQ(factory_.made, 1) << "one vif per directory, however many events it caused";
}

TEST_F(BackendManagerTest, FullLifecycleConnectsThenReleasesTheVifOnRemoval) {
  bring_up(5, 0);
  testing::FakeVif* vif = factory_.find(DomId{5}, DevId{0});
  ASSERT_NE(vif, nullptr);
  EXPECT_TRUE(vif->connected);
  auto st = manager_.status({DomId{5}, DevId{0}});
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->view.backend, xenbus::XenbusState::connected);
  EXPECT_EQ(st->report.queues.size(), 1U);

  libxl_remove(5, 0);
  pump();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::closed);
  EXPECT_EQ(manager_.vif_count(), 0U);
  EXPECT_EQ(factory_.destroyed, 1);
  const auto& j = factory_.journal;
  const auto pos = [&](const std::string& e) {
    return std::find(j.begin(), j.end(), e) - j.begin();
  };
  EXPECT_LT(pos("5/0 disconnect"), pos("5/0 destroy_tap"));
  EXPECT_LT(pos("5/0 destroy_tap"), pos("5/0 destroyed"));

  // libxl deletes the directories afterwards: no vif comes back.
  ASSERT_FALSE(xs_.rm(be(5, 0)));
  ASSERT_FALSE(xs_.rm(fe(5, 0)));
  pump();
  EXPECT_EQ(factory_.made, 1);
}

TEST_F(BackendManagerTest, DeviceReattachedInTheSameDirectoryGetsAFreshVif) {
  bring_up(5, 0);
  libxl_remove(5, 0);
  pump();
  ASSERT_FALSE(xs_.rm(be(5, 0)));
  pump();
  libxl_add(5, 0);
  pump();
  EXPECT_EQ(factory_.made, 2);
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::init_wait);
}

TEST_F(BackendManagerTest, SeveralDomainsAndDevicesAreServedIndependently) {
  libxl_add(5, 0);
  libxl_add(5, 1);
  libxl_add(6, 0);
  pump();
  EXPECT_EQ(manager_.vif_count(), 3U);
  write(be(5, 1) + "/hotplug-status", "connected");
  netfront_connect(5, 1);
  pump();
  EXPECT_EQ(test::read_state(xs_, be(5, 1) + "/state"), XenbusState::connected);
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::init_wait);
  EXPECT_EQ(test::read_state(xs_, be(6, 0) + "/state"), XenbusState::init_wait);
  auto list = manager_.list();
  ASSERT_EQ(list.size(), 3U);
  EXPECT_EQ(format_vif_id(list[0].id), "5/0");
  EXPECT_EQ(format_vif_id(list[1].id), "5/1");
  EXPECT_EQ(format_vif_id(list[2].id), "6/0");
}

TEST_F(BackendManagerTest, ExistingDevicesArePickedUpAtStart) {
  testing::SpecialWatchXenStore xs;
  testing::FakeVifFactory factory;
  ASSERT_FALSE(xs.write(be(7, 2) + "/online", "1"));
  ASSERT_FALSE(xs.write(be(7, 2) + "/state", "1"));
  ASSERT_FALSE(xs.write(be(7, 2) + "/frontend", fe(7, 2)));
  ASSERT_FALSE(xs.write(be(7, 2) + "/frontend-id", "7"));
  ASSERT_FALSE(xs.write(fe(7, 2) + "/state", "1"));
  TunableStore tunables(xs, DomId{0}, vif::Tunables{});
  BackendManager m(xs, DomId{0}, factory, tunables, [](DomId) { return true; });
  ASSERT_FALSE(m.start());
  while (m.process_events()) {
  }
  EXPECT_EQ(m.vif_count(), 1U);
  EXPECT_EQ(test::read_state(xs, be(7, 2) + "/state"), XenbusState::init_wait);
}

// A daemon restarted under a running guest adopts its vif before it handles any watch event
// (the tunables' initial event re-reads a dozen keys: milliseconds each in a loaded dom0).
TEST_F(BackendManagerTest, ConnectedDevicesFoundAtStartAreAdoptedBeforeAnyWatchEvent) {
  testing::SpecialWatchXenStore xs;
  testing::FakeVifFactory factory;
  factory.adopts = true;  // the vif's state record validates
  const std::pair<std::string, std::string> keys[] = {
      {be(7, 2) + "/online", "1"},
      {be(7, 2) + "/state", "4"},
      {be(7, 2) + "/frontend", fe(7, 2)},
      {be(7, 2) + "/frontend-id", "7"},
      {be(7, 2) + "/hotplug-status", "connected"},
      {fe(7, 2) + "/state", "4"},
      {fe(7, 2) + "/tx-ring-ref", "8"},
      {fe(7, 2) + "/rx-ring-ref", "9"},
      {fe(7, 2) + "/event-channel-tx", "11"},
      {fe(7, 2) + "/event-channel-rx", "12"},
      {fe(7, 2) + "/request-rx-copy", "1"},
  };
  for (const auto& [k, v] : keys) ASSERT_FALSE(xs.write(k, v));
  TunableStore tunables(xs, DomId{0}, vif::Tunables{});
  ASSERT_FALSE(tunables.start());
  BackendManager m(xs, DomId{0}, factory, tunables, [](DomId) { return true; });
  ASSERT_FALSE(m.start());
  m.adopt_found();
  // Not one watch event handled yet, and the vif is served: rings taken over, nothing written.
  ASSERT_EQ(m.vif_count(), 1U);
  EXPECT_TRUE(m.initial_scan_done());
  EXPECT_NE(std::find(factory.journal.begin(), factory.journal.end(), "7/2 adopt 1"),
            factory.journal.end());
  // The backends watch's initial event finds it served: no second vif, no reconnect.
  while (m.process_events()) {
  }
  EXPECT_EQ(m.vif_count(), 1U);
  EXPECT_EQ(test::read_state(xs, be(7, 2) + "/state"), XenbusState::connected);
  EXPECT_EQ(std::count_if(factory.journal.begin(), factory.journal.end(),
                          [](const std::string& e) { return e.starts_with("7/2 adopt"); }),
            1);
}

// After its first scan a daemon deletes the state records (and TAPs) that no vif claims. A
// first scan that could not list backend/vif claims none: a record is released only when
// xenstore or the hypervisor says its guest's device is gone, never on an error, or a crash
// recovery would cost every guest its network.
TEST_F(BackendManagerTest, AFailedFirstScanReleasesNoRecordOfALiveVif) {
  testing::SpecialWatchXenStore xs;
  testing::FakeVifFactory factory;
  for (const auto& [k, v] : std::initializer_list<std::pair<std::string, std::string>>{
           {be(7, 0) + "/online", "1"},
           {be(7, 0) + "/state", "4"},
           {be(7, 1) + "/online", "0"},  // libxl's destroy began while no daemon ran
           {be(7, 1) + "/state", "5"},
           {be(9, 0) + "/online", "1"},  // domain 9 is dead
           {be(9, 0) + "/state", "4"}})
    ASSERT_FALSE(xs.write(k, v));
  TunableStore tunables(xs, DomId{0}, vif::Tunables{});
  BackendManager m(xs, DomId{0}, factory, tunables, [](DomId d) { return d.value() != 9; });
  ASSERT_FALSE(m.start());
  xs.fail_directories = std::make_error_code(std::errc::io_error);
  m.adopt_found();
  ASSERT_TRUE(m.initial_scan_done());
  ASSERT_EQ(m.vif_count(), 0U) << "the scan was meant to fail";
  EXPECT_FALSE(m.left_behind(VifId{DomId{7}, DevId{0}})) << "online, its domain alive";
  EXPECT_TRUE(m.left_behind(VifId{DomId{7}, DevId{1}})) << "offline";
  EXPECT_TRUE(m.left_behind(VifId{DomId{7}, DevId{2}})) << "no directory at all";
  EXPECT_TRUE(m.left_behind(VifId{DomId{9}, DevId{0}})) << "its domain is dead";
  // xenstore answering errors: nothing is released.
  xs.fail_reads = std::make_error_code(std::errc::io_error);
  EXPECT_FALSE(m.left_behind(VifId{DomId{7}, DevId{0}}));
  EXPECT_FALSE(m.left_behind(VifId{DomId{7}, DevId{2}}));
  // A vif the daemon serves is never left behind.
  xs.fail_reads = {};
  xs.fail_directories = {};
  while (m.process_events()) {
  }
  ASSERT_EQ(m.vif_count(), 1U);
  EXPECT_FALSE(m.left_behind(VifId{DomId{7}, DevId{0}}));
}

TEST_F(BackendManagerTest, JunkDirectoryNamesAreIgnored) {
  const std::string root = "/local/domain/0/backend/vif";
  for (const char* bad : {"/foo/0", "/-5/0", "/+5/0", "/5x/0", "/65535/0", "/32752/0", "/ 5/0",
                          "/5/bar", "/5/-1", "/5/0x1", "/5/99999999999", "/5/ 0"}) {
    write(root + bad + "/online", "1");
    write(root + bad + "/state", "1");
  }
  pump();
  EXPECT_EQ(manager_.vif_count(), 0U);
  EXPECT_EQ(factory_.made, 0);
  // A real device next to the junk still works.
  libxl_add(5, 0);
  pump();
  EXPECT_EQ(manager_.vif_count(), 1U);
}

TEST_F(BackendManagerTest, DirectoriesBeingRemovedOrOfDeadDomainsGetNoVif) {
  write(be(5, 3) + "/online", "0");
  write(be(5, 3) + "/state", "1");
  write(be(5, 4) + "/online", "1");
  write(be(5, 4) + "/state", "6");
  libxl_add(9, 0);  // domain 9 does not exist
  pump();
  EXPECT_EQ(factory_.made, 0);
}

TEST_F(BackendManagerTest, ReleaseDomainTearsDownTheVifsOfDeadDomainsOnly) {
  bring_up(5, 0);
  bring_up(6, 0);
  alive_.erase(5);
  xs_.fire_special("@releaseDomain");
  pump();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::closed);
  EXPECT_EQ(test::read_state(xs_, be(6, 0) + "/state"), XenbusState::connected);
  EXPECT_EQ(factory_.find(DomId{5}, DevId{0}), nullptr) << "the dead domain's vif is destroyed";
  EXPECT_NE(factory_.find(DomId{6}, DevId{0}), nullptr);
  EXPECT_EQ(manager_.vif_count(), 1U);
  // Our own state=6 write to the dead domain's directory does not resurrect it.
  EXPECT_EQ(factory_.made, 2);
}

TEST_F(BackendManagerTest, DisabledVifIsReportedFatalAndClosed) {
  bring_up(5, 0);
  testing::FakeVif* vif = factory_.find(DomId{5}, DevId{0});
  ASSERT_NE(vif, nullptr);
  vif->disabled_flag = true;
  manager_.check_vifs();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::closing);
  const std::string err = read("/local/domain/0/error/backend/vif/5/0/error");
  EXPECT_EQ(err.rfind(std::to_string(EPROTO) + " data path: ", 0), 0U) << err;
  EXPECT_FALSE(vif->connected) << "the rings are released";
  // Reported once: later checks do not write again.
  const std::size_t journal = factory_.journal.size();
  manager_.check_vifs();
  pump();
  EXPECT_EQ(factory_.journal.size(), journal);

  // The frontend acknowledges with Closed: the device closes (TAP kept, as Linux).
  write(fe(5, 0) + "/state", "6");
  pump();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::closed);
  EXPECT_EQ(manager_.vif_count(), 1U);
}

TEST_F(BackendManagerTest, DisabledIsCheckedAfterEveryEvent) {
  bring_up(5, 0);
  factory_.find(DomId{5}, DevId{0})->disabled_flag = true;
  write(be(6, 0) + "/junk", "x");  // any event through the manager
  pump();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::closing);
}

TEST_F(BackendManagerTest, DisabledBeforeConnectingIsNotReported) {
  libxl_add(5, 0);
  pump();
  factory_.find(DomId{5}, DevId{0})->disabled_flag = true;
  manager_.check_vifs();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::init_wait);
  EXPECT_EQ(read("/local/domain/0/error/backend/vif/5/0/error"), "<absent>");
}

TEST_F(BackendManagerTest, ShutdownClosesEveryVif) {
  bring_up(5, 0);
  libxl_add(6, 0);
  pump();
  manager_.shutdown();
  EXPECT_EQ(test::read_state(xs_, be(5, 0) + "/state"), XenbusState::closed);
  EXPECT_EQ(test::read_state(xs_, be(6, 0) + "/state"), XenbusState::closed);
  EXPECT_EQ(manager_.vif_count(), 0U);
  EXPECT_EQ(factory_.destroyed, 2);
  EXPECT_TRUE(factory_.live.empty());
  // Nothing reacts afterwards.
  libxl_add(7, 0);
  pump();
  EXPECT_EQ(factory_.made, 2);
  EXPECT_EQ(xs_.special_watches(), 0U);
}

TEST_F(BackendManagerTest, NewVifsGetTheTunablesInForce) {
  write("/local/domain/0/unetback/max-queues", "2");
  write("/local/domain/0/unetback/copy-batch", "99");
  pump();
  libxl_add(5, 0);
  pump();
  EXPECT_EQ(read(be(5, 0) + "/multi-queue-max-queues"), "2");
  EXPECT_EQ(factory_.find(DomId{5}, DevId{0})->tunables.copy_batch, 99U);
}

TEST_F(BackendManagerTest, BadTunableIsRejectedAndRewrittenWithThePreviousValue) {
  write("/local/domain/0/unetback/max-queues", "3");
  pump();
  write("/local/domain/0/unetback/max-queues", "99");
  pump();
  EXPECT_EQ(read("/local/domain/0/unetback/max-queues"), "3");
  EXPECT_EQ(tunables_.current().max_queues, 3U);
}

}  // namespace
}  // namespace unetback::daemon
