// BackendXenbus::fatal_from_datapath (the daemon's addition to backend/xenbus): a protocol
// violation found by the data path becomes xenbus_dev_fatal's error node + Closing, with the
// rings released, and the frontend can start over afterwards.
#include <algorithm>
#include <cerrno>
#include <gtest/gtest.h>

#include "backend/xenbus/xenbus_adapter.hpp"
#include "tests/support/xenbus_state.hpp"
#include "tests/unit/xenbus/memory_xenstore.hpp"
#include "tests/unit/xenbus/recording_vif.hpp"

namespace unetback::xenbus {
namespace {

class DatapathFatalTest : public ::testing::Test {
 protected:
  const std::string be_ = "/local/domain/0/backend/vif/5/0";
  const std::string fe_ = "/local/domain/5/device/vif/0";
  std::vector<std::string> journal_;
  testing::MemoryXenStore xs_;
  testing::RecordingVif vif_{journal_};
  BackendXenbus backend_{xs_, DomId{0}, DomId{5}, DevId{0}, vif_, FeatureOptions{1, true, false}};

  DatapathFatalTest() { xs_.set_journal(&journal_); }

  void pump() {
    for (int i = 0; i < 10000; ++i) {
      auto ev = xs_.read_watch();
      if (!ev) return;
      if (backend_.owns(*ev)) backend_.handle_watch(*ev);
    }
    FAIL() << "watch events never stopped";
  }
  void write(const std::string& p, const std::string& v) { ASSERT_FALSE(xs_.write(p, v)); }
  std::string read(const std::string& p) {
    auto r = xs_.read(p);
    return r ? *r : "<absent>";
  }
  std::size_t at(const std::string& e) {
    return static_cast<std::size_t>(std::find(journal_.begin(), journal_.end(), e) -
                                    journal_.begin());
  }
  void add_and_init_wait() {
    ASSERT_FALSE(backend_.start());
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{be_ + "/frontend", fe_},
                                                          {be_ + "/frontend-id", "5"},
                                                          {be_ + "/online", "1"},
                                                          {be_ + "/state", "1"},
                                                          {fe_ + "/state", "1"}})
      write(k, v);
    pump();
    ASSERT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::init_wait);
  }
  void frontend_connects() {
    write(fe_ + "/tx-ring-ref", "8");
    write(fe_ + "/rx-ring-ref", "9");
    write(fe_ + "/event-channel", "10");
    write(fe_ + "/request-rx-copy", "1");
    write(fe_ + "/state", "4");
    pump();
  }
};

TEST_F(DatapathFatalTest, ConnectedVifGoesToClosingWithTheErrorNodeWritten) {
  add_and_init_wait();
  write(be_ + "/hotplug-status", "connected");
  frontend_connects();
  ASSERT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::connected);
  const std::size_t watches = xs_.watch_count();

  backend_.fatal_from_datapath(EPROTO, "tx chain of 20 slots");
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::closing);
  EXPECT_EQ(read("/local/domain/0/error/backend/vif/5/0/error"),
            std::to_string(EPROTO) + " data path: tx chain of 20 slots");
  EXPECT_FALSE(vif_.connected.has_value());
  EXPECT_LT(at("disconnect"), at("write " + be_ + "/state=5"));
  EXPECT_EQ(xs_.watch_count(), watches - 3)
      << "rate, multicast and allow-mac-spoofing watches dropped";
  EXPECT_EQ(backend_.view().rings, RingsState::down);
  EXPECT_TRUE(vif_.tap.has_value()) << "the device still exists";

  // A second report (the flag stays up until the next connect) changes nothing.
  const std::size_t n = journal_.size();
  backend_.fatal_from_datapath(EPROTO, "again");
  EXPECT_EQ(journal_.size(), n);
}

TEST_F(DatapathFatalTest, FrontendCanReconnectAfterAcknowledging) {
  add_and_init_wait();
  write(be_ + "/hotplug-status", "connected");
  frontend_connects();
  backend_.fatal_from_datapath(EPROTO, "bad request");
  write(fe_ + "/state", "6");
  pump();
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::closed);
  write(fe_ + "/state", "1");
  pump();
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::init_wait);
  frontend_connects();
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::connected);
  EXPECT_EQ(vif_.connect_calls, 2);
}

TEST_F(DatapathFatalTest, RingsUpButWaitingForHotplugAlsoCloses) {
  add_and_init_wait();
  frontend_connects();  // rings mapped, hotplug-status not yet connected
  ASSERT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::init_wait);
  backend_.fatal_from_datapath(EPROTO, "bad request");
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::closing);
  EXPECT_FALSE(vif_.connected.has_value());
}

TEST_F(DatapathFatalTest, IgnoredWithoutRings) {
  add_and_init_wait();
  const std::size_t n = journal_.size();
  backend_.fatal_from_datapath(EPROTO, "stale");
  EXPECT_EQ(journal_.size(), n);
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::init_wait);
}

TEST_F(DatapathFatalTest, IgnoredAfterShutdown) {
  add_and_init_wait();
  write(be_ + "/hotplug-status", "connected");
  frontend_connects();
  backend_.shutdown();
  const std::size_t n = journal_.size();
  backend_.fatal_from_datapath(EPROTO, "late");
  EXPECT_EQ(journal_.size(), n);
  EXPECT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::closed);
}

}  // namespace
}  // namespace unetback::xenbus
