// Event channels through xensim: binding rules, masking, the pending-bit semantics, fault
// injection (lost and held events), and a ping-pong between two processes.
#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <gtest/gtest.h>
#include <memory>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/hv/sim/broker_client.hpp"
#include "common/hv/sim/sim_hypervisor.hpp"
#include "tests/integration/xensim/echo_child.hpp"
#include "tests/integration/xensim/event_wait.hpp"
#include "tests/integration/xensim/offering_guest.hpp"
#include "tests/integration/xensim/xensim_process.hpp"
#include "tests/support/figure.hpp"

namespace unetback::test {
namespace {

using namespace std::chrono_literals;

// How long a wait for an event that must come may last before the test fails: a guard
// against a hang, never reached by a run that works, however slow the machine.
constexpr auto kHangGuard = 30s;
// How long "nothing arrives" is watched for. notify() writes the peer's eventfd (or drops or
// holds the event, as injected) before it returns, so what it delivered is there already:
// the watch is a margin, and a slow machine cannot make these checks fail.
constexpr auto kQuiet = 100ms;

/// The process's open descriptors.
std::size_t open_fds() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

hv::HypervisorOptions backend_opts() {
  hv::HypervisorOptions o;
  o.role = hv::Role::backend;
  return o;
}

/// Two event-channel handles of dom0 joined by a loopback channel (Xen allows binding a
/// domain's own unbound port), so one process can play both ends.
class LoopbackChannel : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = std::make_unique<XensimProcess>();
    dom0_ = std::make_unique<hv::SimHypervisor>(world_->dir(), backend_opts());
    a_ = dom0_->open_event_channel();
    b_ = dom0_->open_event_channel();
    auto pa = a_->bind_unbound(kDom0);
    ASSERT_TRUE(pa) << pa.error().message();
    auto pb = b_->bind_interdomain(kDom0, *pa);
    ASSERT_TRUE(pb) << pb.error().message();
    pa_ = *pa;
    pb_ = *pb;
  }

  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> dom0_;
  std::unique_ptr<hv::EventChannel> a_, b_;
  Port pa_{}, pb_{};
};

TEST_F(LoopbackChannel, NotifyReachesThePeerPortOnly) {
  EXPECT_NE(pa_, pb_);
  ASSERT_FALSE(b_->notify(pb_));
  EXPECT_EQ(wait_event(*a_, kHangGuard), pa_);
  EXPECT_FALSE(readable(*b_));
  ASSERT_FALSE(a_->unmask(pa_));
  ASSERT_FALSE(a_->notify(pa_));
  EXPECT_EQ(wait_event(*b_, kHangGuard), pb_);
}

TEST_F(LoopbackChannel, EventRaisedWhileMaskedIsDeliveredOnceAfterUnmask) {
  ASSERT_FALSE(b_->notify(pb_));
  ASSERT_EQ(wait_event(*a_, kHangGuard), pa_);  // now masked
  ASSERT_FALSE(b_->notify(pb_));
  ASSERT_FALSE(b_->notify(pb_));
  EXPECT_FALSE(wait_event(*a_, kQuiet));  // masked: nothing reported
  ASSERT_FALSE(a_->unmask(pa_));
  // Like Xen, an event is a pending bit: two notifications while masked are one event.
  EXPECT_EQ(wait_event(*a_, kHangGuard), pa_);
  ASSERT_FALSE(a_->unmask(pa_));
  EXPECT_FALSE(wait_event(*a_, kQuiet));
}

TEST_F(LoopbackChannel, ClosedPeerLeavesAnUnboundPortThatCanBeBoundAgain) {
  ASSERT_FALSE(b_->unbind(pb_));
  // EVTCHNOP_send on an ECS_UNBOUND port succeeds and delivers nothing.
  EXPECT_FALSE(a_->notify(pa_));
  auto c = dom0_->open_event_channel();
  auto pc = c->bind_interdomain(kDom0, pa_);
  ASSERT_TRUE(pc) << pc.error().message();
  ASSERT_FALSE(a_->notify(pa_));  // must find the new peer, not the cached old one
  EXPECT_EQ(wait_event(*c, kHangGuard), *pc);
  EXPECT_FALSE(readable(*b_));
}

// A backend binds the frontend's port when it connects; its first notification, at the
// first packet, must not open a descriptor of its own (a caller that counts what a connect
// holds, like the hostile suite's leak check, would see it appear later, from a data-path
// thread).
TEST_F(LoopbackChannel, InterdomainBindingTakesTheDescriptorsItsNotificationsNeed) {
  const std::size_t bound = open_fds();
  ASSERT_FALSE(b_->notify(pb_));
  EXPECT_EQ(wait_event(*a_, kHangGuard), pa_);
  EXPECT_EQ(open_fds(), bound) << "the first notify fetched the peer's eventfd";
}

TEST_F(LoopbackChannel, UnknownPortsAreRejected) {
  EXPECT_EQ(a_->notify(Port{999}), std::errc::invalid_argument);
  EXPECT_EQ(a_->unmask(Port{999}), std::errc::invalid_argument);
  EXPECT_EQ(a_->unbind(pb_), std::errc::invalid_argument);  // b's port, not a's
}

TEST_F(LoopbackChannel, DroppedEventsAreLost) {
  ASSERT_FALSE(dom0_->inject_drop_events(kDom0, pa_, 2));
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(b_->notify(pb_));
    EXPECT_FALSE(wait_event(*a_, kQuiet)) << "notification " << i << " should be lost";
  }
  ASSERT_FALSE(b_->notify(pb_));
  EXPECT_EQ(wait_event(*a_, kHangGuard), pa_);
}

TEST_F(LoopbackChannel, StalledDomainGetsItsHeldEventsWhenReleased) {
  ASSERT_FALSE(dom0_->inject_stall(kDom0, true));
  ASSERT_FALSE(b_->notify(pb_));
  ASSERT_FALSE(b_->notify(pb_));
  EXPECT_FALSE(wait_event(*a_, kQuiet));
  ASSERT_FALSE(dom0_->inject_stall(kDom0, false));
  EXPECT_EQ(wait_event(*a_, kHangGuard), pa_);
  ASSERT_FALSE(a_->unmask(pa_));
  EXPECT_FALSE(wait_event(*a_, kQuiet));
  ASSERT_FALSE(b_->notify(pb_));  // and events flow normally again
  EXPECT_EQ(wait_event(*a_, kHangGuard), pa_);
}

TEST(EventChannelBinding, OnlyThePortsOfferedToUsCanBeBound) {
  XensimProcess world;
  hv::SimHypervisor dom0(world.dir(), backend_opts());
  auto a = dom0.open_event_channel();
  auto for_dom5 = a->bind_unbound(DomId{5});
  ASSERT_TRUE(for_dom5);
  EXPECT_EQ(a->bind_interdomain(kDom0, *for_dom5).error(), std::errc::invalid_argument);
  EXPECT_EQ(a->bind_interdomain(kDom0, Port{77}).error(), std::errc::invalid_argument);
  EXPECT_EQ(a->bind_interdomain(DomId{42}, Port{1}).error(), std::errc::no_such_process);
}

TEST(EventChannelBinding, PortsOfAClosedDom0ConnectionAreReleased) {
  XensimProcess world;
  const std::string dir = world.dir();
  // Another dom0 process offers a port and exits without unbinding it.
  ChildProcess child([dir](int ctrl) -> int {
    hv::SimHypervisor other(dir, backend_opts());
    auto ch = other.open_event_channel();
    auto p = ch->bind_unbound(kDom0);
    send_line(ctrl, p ? std::to_string(p->value()) : "error");
    (void)recv_line(ctrl);
    ::_exit(0);  // no destructors: only the connection's close can free the port
  });
  auto offered = child.recv();
  ASSERT_TRUE(offered && *offered != "error");
  const Port port{static_cast<std::uint32_t>(std::stoul(*offered))};
  hv::SimHypervisor dom0(dir, backend_opts());
  {
    // While its owner lives the port can be bound (and is then used up).
    auto probe = dom0.open_event_channel();
    auto bound = probe->bind_interdomain(kDom0, port);
    ASSERT_TRUE(bound) << bound.error().message();
  }
  child.send("go");
  ASSERT_TRUE(child.wait());
  auto a = dom0.open_event_channel();
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  // The broker handles the close asynchronously: until then the port is still offered.
  auto r = a->bind_interdomain(kDom0, port);
  while (r && std::chrono::steady_clock::now() < deadline) {
    ASSERT_FALSE(a->unbind(*r));
    std::this_thread::sleep_for(5ms);
    r = a->bind_interdomain(kDom0, port);
  }
  EXPECT_EQ(r.error(), std::errc::invalid_argument);
}

/// A world with two guests, each offering dom0 a port, as a backend restricted to one guest
/// finds it.
class RestrictedBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = std::make_unique<XensimProcess>();
    toolstack_ = std::make_unique<hv::SimHypervisor>(world_->dir(), backend_opts());
    a_ = offering_guest(*toolstack_, world_->dir(), "guest-a");
    b_ = offering_guest(*toolstack_, world_->dir(), "guest-b");
  }

  std::unique_ptr<XensimProcess> world_;
  std::unique_ptr<hv::SimHypervisor> toolstack_;
  OfferingGuest a_, b_;
};

TEST_F(RestrictedBackend, BindsOnlyToTheGuestItServes) {
  hv::SimHypervisor worker(world_->dir(), backend_opts());
  ASSERT_FALSE(worker.restrict_to_domain(a_.id));
  auto ch = worker.open_event_channel();
  EXPECT_EQ(ch->bind_interdomain(b_.id, b_.offered).error(), std::errc::permission_denied);
  EXPECT_EQ(ch->bind_unbound(a_.id).error(), std::errc::permission_denied);
  auto bound = ch->bind_interdomain(a_.id, a_.offered);
  ASSERT_TRUE(bound) << bound.error().message();
  ASSERT_FALSE(ch->notify(*bound));
  EXPECT_EQ(wait_event(*a_.channel, kHangGuard), a_.offered);
  // The restriction is the connection's: another dom0 process still binds guest B's port.
  auto other = toolstack_->open_event_channel();
  EXPECT_TRUE(other->bind_interdomain(b_.id, b_.offered));
}

TEST_F(RestrictedBackend, LosesTheToolstacksOperationsForGood) {
  hv::SimHypervisor worker(world_->dir(), backend_opts());
  ASSERT_FALSE(worker.restrict_to_domain(a_.id));
  EXPECT_EQ(worker.restrict_to_domain(b_.id), std::errc::permission_denied);
  EXPECT_EQ(worker.create_domain("escape").error(), std::errc::operation_not_permitted);
  EXPECT_EQ(worker.destroy_domain(b_.id), std::errc::operation_not_permitted);
  EXPECT_EQ(worker.inject_stall(b_.id, true), std::errc::operation_not_permitted);
  EXPECT_EQ(worker.inject_drop_events(b_.id, b_.offered, 1), std::errc::operation_not_permitted);
  EXPECT_TRUE(worker.domain_exists(a_.id));
  EXPECT_FALSE(worker.domain_exists(b_.id));
  EXPECT_TRUE(toolstack_->domain_exists(b_.id));  // B lives; the worker only cannot ask
  // Grant mapping stays open to it, as gntdev is: the worker still copies guest A's grants.
  EXPECT_NO_THROW((void)worker.grant_table());
}

TEST_F(RestrictedBackend, IsRefusedForDom0AReservedDomidOrAfterAChannelWasOpened) {
  hv::SimHypervisor worker(world_->dir(), backend_opts());
  EXPECT_EQ(worker.restrict_to_domain(kDom0), std::errc::invalid_argument);
  EXPECT_EQ(worker.restrict_to_domain(kFirstReservedDomId), std::errc::invalid_argument);
  auto early = worker.open_event_channel();
  EXPECT_EQ(worker.restrict_to_domain(a_.id), std::errc::device_or_resource_busy);
}

TEST_F(RestrictedBackend, ACompromisedClientSpeakingTheProtocolIsHeldByXensim) {
  // What a process that bypasses the client library can ask for: xensim checks, not the
  // library. Another dom0 connection binds guest B's port first.
  auto victim = toolstack_->open_event_channel();
  auto victims_port = victim->bind_interdomain(b_.id, b_.offered);
  ASSERT_TRUE(victims_port);
  hv::sim::BrokerClient raw(world_->dir() + "/hv.sock");
  ASSERT_TRUE(raw.call(hv::sim::make_request(hv::sim::BrokerOp::register_dom0)));
  auto restrict = hv::sim::make_request(hv::sim::BrokerOp::restrict_client);
  restrict.domid = a_.id.value();
  ASSERT_TRUE(raw.call(restrict));
  // Where another connection's port sends its events (guest B's eventfd): refused.
  auto peer = hv::sim::make_request(hv::sim::BrokerOp::evtchn_peer);
  peer.port = victims_port->value();
  EXPECT_EQ(raw.call(peer).error(), std::errc::not_connected);
  auto unbind = hv::sim::make_request(hv::sim::BrokerOp::evtchn_unbind);
  unbind.port = victims_port->value();
  EXPECT_EQ(raw.call(unbind).error(), std::errc::not_connected);
  auto bind_b = hv::sim::make_request(hv::sim::BrokerOp::evtchn_bind_interdomain);
  bind_b.domid = b_.id.value();
  bind_b.port = b_.offered.value();
  EXPECT_EQ(raw.call(bind_b).error(), std::errc::permission_denied);
  auto lift = hv::sim::make_request(hv::sim::BrokerOp::restrict_client);
  lift.domid = b_.id.value();
  EXPECT_EQ(raw.call(lift).error(), std::errc::permission_denied);
  // The victim's channel still works.
  ASSERT_FALSE(victim->notify(*victims_port));
  EXPECT_EQ(wait_event(*b_.channel, kHangGuard), b_.offered);
}

TEST(EventChannelProcesses, PingPongCountsMatchExactly) {
  constexpr int kRounds = 20000;
  XensimProcess world;
  const std::string dir = world.dir();
  ChildProcess child([dir](int ctrl) { return echo_main(ctrl, dir, kRounds); });
  auto hello = child.recv();
  ASSERT_TRUE(hello);
  std::istringstream in(*hello);
  unsigned domid = 0, port = 0;
  in >> domid >> port;

  hv::SimHypervisor dom0(dir, backend_opts());
  auto ch = dom0.open_event_channel();
  auto local = ch->bind_interdomain(DomId{static_cast<std::uint16_t>(domid)}, Port{port});
  ASSERT_TRUE(local) << local.error().message();
  int answered = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_FALSE(ch->notify(*local));
    auto p = wait_event(*ch, kHangGuard);
    ASSERT_EQ(p, *local) << "round " << i;
    ++answered;
    ASSERT_FALSE(ch->unmask(*local));
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(child.recv(), "seen " + std::to_string(kRounds));
  EXPECT_EQ(answered, kRounds);
  EXPECT_FALSE(wait_event(*ch, kQuiet));  // no extra event anywhere
  child.send("bye");
  auto st = child.wait();
  ASSERT_TRUE(st);
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  report_figure("xensim_event_round_trip_us", secs / kRounds * 1e6, "us");
}

}  // namespace
}  // namespace unetback::test
