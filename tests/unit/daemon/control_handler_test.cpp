// The control protocol end to end inside one process: request line -> manager -> JSON line.
#include "backend/daemon/control_handler.hpp"

#include <gtest/gtest.h>

#include "tests/support/xenbus_state.hpp"
#include "tests/unit/daemon/fake_vif_factory.hpp"
#include "tests/unit/daemon/special_watch_xenstore.hpp"

namespace unetback::daemon {
namespace {

using xenbus::XenbusState;

class ControlHandlerTest : public ::testing::Test {
 protected:
  testing::SpecialWatchXenStore xs_;
  testing::FakeVifFactory factory_;
  TunableStore tunables_{xs_, DomId{0}, vif::Tunables{}};
  BackendManager manager_{xs_, DomId{0}, factory_, tunables_, [](DomId) { return true; }};
  const std::string be_ = "/local/domain/0/backend/vif/5/0";
  const std::string fe_ = "/local/domain/5/device/vif/0";

  void pump() {
    while (manager_.process_events()) {
    }
  }
  void SetUp() override {
    ASSERT_FALSE(manager_.start());
    pump();
  }
  void connect_vif() {
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{be_ + "/frontend", fe_},
                                                          {be_ + "/frontend-id", "5"},
                                                          {be_ + "/online", "1"},
                                                          {be_ + "/state", "1"},
                                                          {fe_ + "/state", "1"}})
      ASSERT_FALSE(xs_.write(k, v));
    pump();
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{be_ + "/hotplug-status", "connected"},
                                                          {fe_ + "/tx-ring-ref", "8"},
                                                          {fe_ + "/rx-ring-ref", "9"},
                                                          {fe_ + "/event-channel", "10"},
                                                          {fe_ + "/request-rx-copy", "1"},
                                                          {fe_ + "/state", "4"}})
      ASSERT_FALSE(xs_.write(k, v));
    pump();
    ASSERT_EQ(test::read_state(xs_, be_ + "/state"), XenbusState::connected);
  }
  std::string ask(std::string_view line) { return handle_line(line, manager_); }
};

TEST_F(ControlHandlerTest, ListWithoutVifs) {
  EXPECT_EQ(ask("list"), R"({"vifs":[]})");
}

TEST_F(ControlHandlerTest, ListShowsStateTapAndCarrier) {
  connect_vif();
  EXPECT_EQ(ask("list"),
            R"({"vifs":[{"vif":"5/0","domid":5,"devid":0,"state":"Connected","state_id":4,)"
            R"("frontend_state":"Connected","tap":"vif5.0","connected":true,"carrier":true,)"
            R"("adopted":"fresh","queues":1}]})");
}

TEST_F(ControlHandlerTest, StatsCarryEveryQueueCounter) {
  connect_vif();
  const std::string all = ask("stats");
  // mapped_grant_pages: this process maps nothing here (the test vif is a fake).
  EXPECT_EQ(
      all,
      R"({"mapped_grant_pages":0,"vifs":[{"vif":"5/0","domid":5,"devid":0,)"
      R"("state":"Connected","state_id":4,)"
      R"("frontend_state":"Connected","tap":"vif5.0","connected":true,"carrier":true,)"
      R"("adopted":"fresh","queues":[{"queue":0,"counters":{"rx_packets":100,"tx_packets":200}}]}]})");
  EXPECT_EQ(ask("stats 5/0"), all);
  EXPECT_EQ(ask("stats 5/1"), R"({"error":"no vif 5/1"})");
}

TEST_F(ControlHandlerTest, RingsDumpBothRingsPerQueue) {
  connect_vif();
  EXPECT_EQ(ask("rings 5/0"),
            R"({"vif":"5/0","connected":true,"queues":[{"queue":0,)"
            R"("tx":{"req_prod":10,"req_event":11,"rsp_prod":9,"rsp_event":10,"req_cons":10,)"
            R"("rsp_prod_pvt":9},"rx":{"req_prod":20,"req_event":21,"rsp_prod":19,)"
            R"("rsp_event":20,"req_cons":20,"rsp_prod_pvt":19}}]})");
  EXPECT_EQ(ask("rings 9/9"), R"({"error":"no vif 9/9"})");
}

TEST_F(ControlHandlerTest, GetAndSetGoThroughTheTunables) {
  EXPECT_EQ(ask("get max-queues"), R"({"name":"max-queues","value":"4"})");
  EXPECT_EQ(ask("set max-queues 2"), R"({"name":"max-queues","value":"2"})");
  EXPECT_EQ(*xs_.read("/local/domain/0/unetback/max-queues"), "2");
  pump();
  EXPECT_EQ(ask("get max-queues"), R"({"name":"max-queues","value":"2"})");
  EXPECT_EQ(ask("set max-queues 40"), R"({"error":"max-queues: 40 is out of range 1..16"})");
  EXPECT_EQ(ask("get max-queues"), R"({"name":"max-queues","value":"2"})");
  EXPECT_EQ(ask("get nope"), R"({"error":"unknown tunable 'nope'"})");
  EXPECT_EQ(ask("set rx-coalesce legacy"), R"({"name":"rx-coalesce","value":"legacy"})");
}

TEST_F(ControlHandlerTest, TunablesListsEveryKeyWithItsDomain) {
  const std::string t = ask("tunables");
  for (const auto& spec : tunable_specs()) {
    EXPECT_NE(t.find("\"name\":\"" + std::string(spec.name) + "\""), std::string::npos)
        << spec.name;
  }
  EXPECT_NE(t.find(R"("name":"fatal-skb-slots","value":"20","min":19,"max":64)"),
            std::string::npos);
  EXPECT_NE(t.find(R"("name":"rx-coalesce","value":"full","choices":["legacy","full"])"),
            std::string::npos);
}

TEST_F(ControlHandlerTest, BadRequestsGetAnErrorObject) {
  EXPECT_EQ(
      ask("bogus"),
      R"j({"error":"unknown request 'bogus' (list, stats, rings, tunables, get, set, status, upgrade)"})j");
  EXPECT_EQ(ask("get"), R"({"error":"'get': missing argument"})");
  EXPECT_EQ(ask("set \"x\\ 1"), R"({"error":"\"x\\: unknown tunable '\"x\\'"})");
}

TEST_F(ControlHandlerTest, StatusNamesTheDaemonAndItsImage) {
  DaemonInfo info{812, "/usr/sbin/unetbackd", "1764748800.123456", "0.1.0", {}};
  connect_vif();
  EXPECT_EQ(handle_line("status", manager_, &info),
            R"({"pid":812,"program":"/usr/sbin/unetbackd","started":"1764748800.123456",)"
            R"("version":"0.1.0","vifs":1})");
  // An upgrade whose successor ended before it took over: said until the next one starts.
  info.upgrade_error = "the successor /usr/sbin/unetbackd (pid 900) exited with status 1";
  EXPECT_EQ(handle_line("status", manager_, &info),
            R"({"pid":812,"program":"/usr/sbin/unetbackd","started":"1764748800.123456",)"
            R"("version":"0.1.0","upgrade_error":"the successor /usr/sbin/unetbackd (pid 900) )"
            R"(exited with status 1","vifs":1})");
  EXPECT_EQ(ask("status"), R"({"error":"status: not answered here"})");
  EXPECT_EQ(ask("status now"), R"({"error":"'status': too many arguments"})");
}

TEST_F(ControlHandlerTest, AnUpgradeIsStartedOnceAndARefusalSaysWhy) {
  int started = 0;
  std::optional<std::string> refuse;
  DaemonInfo info{812, "/usr/sbin/unetbackd", "1.0", "0.1.0", [&]() {
                    if (!refuse) ++started;
                    return refuse;
                  }};
  EXPECT_EQ(handle_line("upgrade", manager_, &info),
            R"({"upgrading":true,"pid":812,"program":"/usr/sbin/unetbackd"})");
  EXPECT_EQ(started, 1);
  refuse = "already stopping";
  EXPECT_EQ(handle_line("upgrade", manager_, &info), R"({"error":"upgrade: already stopping"})");
  EXPECT_EQ(started, 1);
  EXPECT_EQ(ask("upgrade"), R"({"error":"upgrade: not possible here"})");
}

}  // namespace
}  // namespace unetback::daemon
