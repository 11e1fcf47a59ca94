// The pure frontend (netfront-shim) state machine: every (view, event) pair of a set of named
// views with its exact action list and resulting phase; every reachable view x every event
// against the protocol invariants; and the sequences the shim lives through (connect, backend
// close and reconnect, restarted backend, XDP reconfiguration, suspend and resume, stop).
#include "frontend-shim/frontend_state.hpp"

#include <gtest/gtest.h>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "frontend-shim/shim_options.hpp"
#include "tests/support/param_name.hpp"

namespace unetback::shim {

// NOLINTNEXTLINE(readability-identifier-naming): GoogleTest's printer hook has this name.
void PrintTo(const FrontendAction& a, std::ostream* os) {
  *os << describe(a);
}
// NOLINTNEXTLINE(readability-identifier-naming): GoogleTest's printer hook has this name.
void PrintTo(const FrontendView& v, std::ostream* os) {
  *os << describe(v);
}

namespace {

using S = XenbusState;
using P = FrontendPhase;

constexpr std::uint16_t kNewDomid = 7;
constexpr std::uint32_t kHeadroom = 256;

// ---- views ------------------------------------------------------------------------------------

struct NamedView {
  std::string name;
  FrontendView view;
};

FrontendView make(P phase, std::optional<S> backend, bool ever, bool per_state = false,
                  std::optional<int> exit_code = std::nullopt) {
  FrontendView v;
  v.phase = phase;
  v.backend = backend;
  v.ever_connected = ever;
  v.per_state_deadline = per_state;
  v.exit_code = exit_code;
  return v;
}

const std::vector<NamedView>& named_views() {
  static const std::vector<NamedView> views = {
      {"Detached", make(P::detached, std::nullopt, false)},
      {"Released", make(P::detached, std::nullopt, true)},
      {"Waiting", make(P::waiting, S::initialising, false)},
      {"WaitingPerState", make(P::waiting, S::initialising, false, true)},
      {"Restarting", make(P::restarting, S::closing, true)},
      {"Connecting", make(P::connecting, S::init_wait, false)},
      {"AwaitingBackend", make(P::awaiting_backend, S::init_wait, false)},
      {"Connected", make(P::connected, S::connected, true)},
      {"Reconfiguring", make(P::reconfiguring, S::connected, true)},
      {"Closing", make(P::closing, S::init_wait, true)},
      {"ClosingToStop", make(P::closing, S::connected, true, false, kExitClean)},
      {"Suspended", make(P::suspended, S::connected, true)},
      {"Stopped", make(P::stopped, S::closed, true, false, kExitClean)},
  };
  return views;
}

// ---- events -----------------------------------------------------------------------------------

const std::vector<FrontendEvent>& all_events() {
  static const std::vector<FrontendEvent> events = [] {
    std::vector<FrontendEvent> e;
    for (std::uint8_t s = 0; s < xenbus::kXenbusStateCount; ++s)
      e.emplace_back(BackendStateChanged{static_cast<S>(s)});
    e.emplace_back(BackendStateChanged{std::nullopt});
    e.emplace_back(VifRemoved{});
    e.emplace_back(XenstoreLost{});
    e.emplace_back(DomainOpened{std::nullopt});
    e.emplace_back(DomainOpened{S::initialising});
    e.emplace_back(DomainOpened{S::connected});
    e.emplace_back(DomainOpened{S::closed});
    e.emplace_back(OpenFailed{});
    e.emplace_back(ConnectSucceeded{});
    e.emplace_back(ConnectFailed{});
    e.emplace_back(TapSetupFailed{});
    e.emplace_back(SuspendRequested{});
    e.emplace_back(SuspendAcknowledged{});
    e.emplace_back(ResumeRequested{kNewDomid});
    e.emplace_back(XdpHeadroomRequested{kHeadroom});
    e.emplace_back(ReconfigureFailed{});
    e.emplace_back(ReconfigureDeadlineExpired{});
    e.emplace_back(ConnectDeadlineExpired{});
    e.emplace_back(CloseDeadlineExpired{});
    e.emplace_back(StopRequested{kExitClean});
    return e;
  }();
  return events;
}

std::string b(const char* state) {
  return std::string("BackendStateChanged(") + state + ")";
}

// ---- the expected table -------------------------------------------------------------------------

// An entry: the exact actions and the phase the view ends in. Pairs not listed are ignored:
// no actions and the view unchanged, but for the backend's state, which a live view records.
struct Expect {
  FrontendActions actions;
  P phase;
};

using Key = std::pair<std::string, std::string>;

std::map<Key, Expect> build_table() {
  std::map<Key, Expect> t;
  auto at = [&](const std::string& view, const std::string& event, Expect e) {
    EXPECT_TRUE(t.emplace(Key{view, event}, std::move(e)).second) << view << " " << event;
  };
  const WriteState w1{S::initialising}, w6{S::closed};
  const BeginClose bc_closed{CloseReason::backend_closed},
      bc_restarted{CloseReason::backend_restarted}, bc_removed{CloseReason::vif_removed},
      bc_stop{CloseReason::stopping};
  const FinishClose fin{true}, fin_late{false};
  const std::string lost = "XenstoreLost", removed = "VifRemoved", stop = "StopRequested(0)",
                    deadline = "ConnectDeadlineExpired", close_deadline = "CloseDeadlineExpired",
                    sreq = "SuspendRequested", sack = "SuspendAcknowledged",
                    resume = "ResumeRequested(7)";
  const FrontendActions stop_now{BeginStop{kExitClean}, CancelConnectDeadline{}, Exit{kExitClean}};
  const FrontendActions lost_now{BeginStop{kExitXenstoreLost}, CancelConnectDeadline{},
                                 Exit{kExitXenstoreLost}};
  const FrontendActions timeout_now{ReportConnectTimeout{}, BeginStop{kExitSetupFailure},
                                    CancelConnectDeadline{}, Exit{kExitSetupFailure}};
  const FrontendActions suspend_now{StopDataPath{}, CancelCloseDeadline{}, CancelConnectDeadline{}};

  // Detached: only an open, a resume or a stop.
  for (const std::string v : {"Detached", "Released"}) {
    const bool first = v == "Detached";
    const FrontendActions arm = first ? FrontendActions{ArmConnectDeadline{}} : FrontendActions{};
    FrontendActions stale = arm;
    stale.emplace_back(w6);
    at(v, "DomainOpened(gone)", {arm, P::waiting});
    at(v, "DomainOpened(Initialising)", {arm, P::waiting});
    at(v, "DomainOpened(Connected)", {stale, P::restarting});  // a crashed shim's 4: reset
    at(v, "DomainOpened(Closed)", {arm, P::restarting});
    at(v, "OpenFailed",
       {{BeginStop{kExitSetupFailure}, CancelConnectDeadline{}, Exit{kExitSetupFailure}},
        P::stopped});
    at(v, resume, {{OpenDomain{kNewDomid}}, P::detached});
    at(v, stop, {stop_now, P::stopped});
  }

  // Waiting for InitWait (also with the per-state deadline of win-xenvif).
  for (const std::string v : {"Waiting", "WaitingPerState"}) {
    const bool per_state = v == "WaitingPerState";
    at(v, b("InitWait"),
       {per_state ? FrontendActions{ArmConnectDeadline{}, Connect{}} : FrontendActions{Connect{}},
        P::connecting});
    if (per_state) {
      for (const char* s : {"Unknown", "Initialised", "Connected", "Closing", "Closed",
                            "Reconfiguring", "Reconfigured", "gone"})
        at(v, b(s), {{ArmConnectDeadline{}}, P::waiting});
    }
    at(v, lost, {lost_now, P::stopped});
    at(v, sreq, {{AcknowledgeSuspend{}}, P::waiting});
    at(v, sack, {suspend_now, P::suspended});
    at(v, deadline, {timeout_now, P::stopped});
    at(v, stop, {stop_now, P::stopped});
  }

  // Restarting after a close: Initialising once the backend is there and out of Closing.
  const std::string rs = "Restarting";
  for (const char* s : {"Unknown", "Initialising", "Initialised", "Connected", "Closed",
                        "Reconfiguring", "Reconfigured"})
    at(rs, b(s), {{w1}, P::waiting});
  at(rs, b("InitWait"), {{w1, Connect{}}, P::connecting});
  at(rs, lost, {lost_now, P::stopped});
  at(rs, sreq, {{AcknowledgeSuspend{}}, P::restarting});
  at(rs, sack, {suspend_now, P::suspended});
  at(rs, stop, {stop_now, P::stopped});

  // Connecting: only the outcome of Connect (and a stop, or the deadline).
  const std::string cn = "Connecting";
  at(cn, "ConnectSucceeded", {{}, P::awaiting_backend});
  at(cn, "ConnectFailed", {{}, P::waiting});
  at(cn, "TapSetupFailed",
     {{BeginStop{kExitSetupFailure}, CancelConnectDeadline{}, bc_stop, ArmCloseDeadline{}},
      P::closing});
  at(cn, deadline, {timeout_now, P::stopped});
  at(cn, stop, {stop_now, P::stopped});

  // The rings up: awaiting the backend's Connected, connected, reconfiguring.
  for (const std::string v : {"AwaitingBackend", "Connected", "Reconfiguring"}) {
    at(v, b("Closing"), {{bc_closed, fin}, P::restarting});
    at(v, b("Closed"), {{bc_closed, fin, w1}, P::waiting});
    at(v, b("gone"), {{bc_closed, fin}, P::restarting});
    at(v, removed, {{bc_removed, fin}, P::restarting});
    at(v, lost,
       {{BeginStop{kExitXenstoreLost}, CancelConnectDeadline{}, bc_stop, fin,
         Exit{kExitXenstoreLost}},
        P::stopped});
    const P phase = v == "AwaitingBackend" ? P::awaiting_backend
                    : v == "Connected"     ? P::connected
                                           : P::reconfiguring;
    at(v, sreq, {{AcknowledgeSuspend{}}, phase});
    at(v, sack, {suspend_now, P::suspended});
    at(v, stop,
       {{BeginStop{kExitClean}, CancelConnectDeadline{}, bc_stop, ArmCloseDeadline{}}, P::closing});
  }
  at("AwaitingBackend", b("Connected"),
     {{CancelConnectDeadline{}, AnnounceConnected{}}, P::connected});
  at("AwaitingBackend", deadline,
     {{ReportConnectTimeout{}, BeginStop{kExitSetupFailure}, CancelConnectDeadline{}, bc_stop,
       ArmCloseDeadline{}},
      P::closing});
  // A backend back in InitWait after Connected was restarted: close, then start over.
  at("Connected", b("InitWait"), {{bc_restarted, ArmCloseDeadline{}}, P::closing});
  at("Reconfiguring", b("InitWait"), {{bc_restarted, ArmCloseDeadline{}}, P::closing});
  at("Connected", "XdpHeadroomRequested(256)",
     {{BeginReconfiguration{kHeadroom}}, P::reconfiguring});
  at("Reconfiguring", b("Reconfigured"), {{EndReconfiguration{true}}, P::connected});
  at("Reconfiguring", "ReconfigureFailed", {{}, P::connected});
  at("Reconfiguring", "ReconfigureDeadlineExpired", {{EndReconfiguration{false}}, P::connected});

  // Closing: the rings go once the backend reads 5..8 or is gone, or at the deadline.
  const std::string cl = "Closing";
  at(cl, b("Closing"), {{fin}, P::restarting});
  for (const char* s : {"Closed", "Reconfiguring", "Reconfigured"})
    at(cl, b(s), {{fin, w1}, P::waiting});
  at(cl, b("gone"), {{fin}, P::restarting});
  at(cl, removed, {{fin}, P::restarting});
  at(cl, lost,
     {{fin, BeginStop{kExitXenstoreLost}, CancelConnectDeadline{}, Exit{kExitXenstoreLost}},
      P::stopped});
  at(cl, sreq, {{AcknowledgeSuspend{}}, P::closing});
  at(cl, sack, {suspend_now, P::suspended});
  at(cl, close_deadline, {{fin_late}, P::restarting});
  at(cl, stop, {{BeginStop{kExitClean}, CancelConnectDeadline{}}, P::closing});

  // Closing to stop: the loop ends with the close.
  const std::string cs = "ClosingToStop";
  for (const char* s : {"Closing", "Closed", "Reconfiguring", "Reconfigured", "gone"})
    at(cs, b(s), {{fin, Exit{kExitClean}}, P::stopped});
  at(cs, removed, {{fin, Exit{kExitClean}}, P::stopped});
  at(cs, lost, {{fin, Exit{kExitClean}}, P::stopped});
  at(cs, close_deadline, {{fin_late, Exit{kExitClean}}, P::stopped});

  // Suspended: the domain goes once the vif is removed; a resume opens the new one.
  const std::string su = "Suspended";
  at(su, removed, {{ReleaseDomain{}}, P::detached});
  at(su, resume, {{ReleaseDomain{}, OpenDomain{kNewDomid}}, P::detached});
  at(su, stop,
     {{BeginStop{kExitClean}, CancelConnectDeadline{}, bc_stop, ArmCloseDeadline{}}, P::closing});

  // Stopped: nothing at all.
  return t;
}

const std::map<Key, Expect>& table() {
  static const std::map<Key, Expect> t = build_table();
  return t;
}

bool live(P p) {
  return p != P::detached && p != P::suspended && p != P::stopped;
}

class EveryViewEveryEvent : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {
};

TEST_P(EveryViewEveryEvent, GivesExactlyTheExpectedActions) {
  const auto [vi, ei] = GetParam();
  const NamedView& nv = named_views()[vi];
  const FrontendEvent& ev = all_events()[ei];
  const FrontendTransition t = frontend_next(nv.view, ev);
  auto it = table().find({nv.name, describe(ev)});
  if (it == table().end()) {
    EXPECT_TRUE(t.actions.empty()) << nv.name << " + " << describe(ev) << " must be ignored";
    FrontendView kept = nv.view;
    if (const auto* bs = std::get_if<BackendStateChanged>(&ev); bs && live(nv.view.phase))
      kept.backend = bs->state;  // recorded, nothing done
    EXPECT_EQ(t.view, kept) << nv.name << " + " << describe(ev);
  } else {
    EXPECT_EQ(t.actions, it->second.actions) << nv.name << " + " << describe(ev);
    EXPECT_EQ(t.view.phase, it->second.phase)
        << nv.name << " + " << describe(ev) << " -> " << describe(t.view);
  }
}

std::string pair_name(const ::testing::TestParamInfo<std::tuple<std::size_t, std::size_t>>& info) {
  return test::gtest_safe_name(named_views()[std::get<0>(info.param)].name + "_" +
                               describe(all_events()[std::get<1>(info.param)]));
}

INSTANTIATE_TEST_SUITE_P(FrontendState, EveryViewEveryEvent,
                         ::testing::Combine(::testing::Range<std::size_t>(0, named_views().size()),
                                            ::testing::Range<std::size_t>(0, all_events().size())),
                         pair_name);

TEST(FrontendState, TableCoversTheNamedViewsAndEvents) {
  ASSERT_EQ(named_views().size(), 13U);
  ASSERT_EQ(all_events().size(), 29U);
  // Every phase has a named view; every table entry names a real (view, event) pair.
  std::set<P> phases;
  std::set<std::string> views, events;
  for (const auto& v : named_views()) {
    views.insert(v.name);
    phases.insert(v.view.phase);
  }
  EXPECT_EQ(phases.size(), kFrontendPhaseCount);
  for (const auto& e : all_events()) events.insert(describe(e));
  for (const auto& [key, expect] : table()) {
    EXPECT_TRUE(views.count(key.first)) << key.first;
    EXPECT_TRUE(events.count(key.second)) << key.second;
  }
}

// ---- invariants -------------------------------------------------------------------------------

// Checks that hold from every reachable view.
void check(const FrontendView& before, const FrontendEvent& ev, const FrontendTransition& t) {
  const std::string ctx = describe(before) + " + " + describe(ev);
  const FrontendView& v = t.view;
  if (before.phase == P::stopped) {
    EXPECT_TRUE(t.actions.empty()) << ctx;
    EXPECT_EQ(v, before) << ctx;
    return;
  }
  // Connected once stays so; a stop is for good and keeps its code.
  if (before.ever_connected) EXPECT_TRUE(v.ever_connected) << ctx;
  if (before.exit_code) EXPECT_EQ(v.exit_code, before.exit_code) << ctx;
  // Only the closing and the stopped phases carry an exit code.
  if (v.exit_code) EXPECT_TRUE(v.phase == P::closing || v.phase == P::stopped) << ctx;
  if (v.phase == P::stopped) EXPECT_TRUE(v.exit_code) << ctx;

  // TapSetupFailed: Connect got the rings up, then the TAP could not be made.
  bool rings = rings_up(before.phase) || before.phase == P::closing ||
               (before.phase == P::connecting && std::holds_alternative<TapSetupFailed>(ev));
  bool close_pending = false, exited = false;
  for (std::size_t i = 0; i < t.actions.size(); ++i) {
    const FrontendAction& a = t.actions[i];
    EXPECT_FALSE(exited) << ctx << ": an action after Exit";
    if (const auto* w = std::get_if<WriteState>(&a)) {
      // F=4, 5, 6, 7 are Netfront's (Connect, BeginClose, FinishClose, reconfiguration):
      // only the stale reset (6, when nothing is up) and the restart (1) are written plainly.
      EXPECT_TRUE(w->state == S::initialising || w->state == S::closed) << ctx;
      EXPECT_FALSE(rings) << ctx << ": a plain state write with the rings up";
    }
    if (std::holds_alternative<Connect>(a)) {
      EXPECT_EQ(i + 1, t.actions.size()) << ctx << ": Connect must be last";
      EXPECT_FALSE(rings) << ctx;
      EXPECT_EQ(v.phase, P::connecting) << ctx;
    }
    if (std::holds_alternative<BeginClose>(a)) {
      EXPECT_TRUE(rings && !close_pending) << ctx << ": BeginClose without rings";
      close_pending = true;
    }
    if (std::holds_alternative<FinishClose>(a)) {
      EXPECT_TRUE(rings) << ctx << ": FinishClose without a close";
      rings = false;
      close_pending = false;
    }
    if (std::holds_alternative<ArmCloseDeadline>(a)) {
      EXPECT_TRUE(close_pending) << ctx;
      EXPECT_EQ(v.phase, P::closing) << ctx;
    }
    if (std::holds_alternative<Exit>(a)) {
      EXPECT_FALSE(rings) << ctx << ": exit with the rings up";
      EXPECT_EQ(v.phase, P::stopped) << ctx;
      exited = true;
    }
    if (std::holds_alternative<AnnounceConnected>(a)) {
      EXPECT_EQ(before.phase, P::awaiting_backend) << ctx;
      EXPECT_EQ(v.backend, S::connected) << ctx;
    }
    if (std::holds_alternative<EndReconfiguration>(a)) {
      EXPECT_EQ(before.phase, P::reconfiguring) << ctx;
    }
    if (std::holds_alternative<ReleaseDomain>(a)) {
      EXPECT_EQ(before.phase, P::suspended) << ctx;
    }
  }
  // A close is either finished or waits in Closing with its deadline armed.
  if (close_pending) EXPECT_EQ(v.phase, P::closing) << ctx;
  if (v.phase == P::closing && before.phase != P::closing) {
    EXPECT_TRUE(close_pending) << ctx;
  }
}

TEST(FrontendState, EveryReachableViewAndEventKeepsTheInvariants) {
  std::map<std::string, FrontendView> seen;
  std::vector<FrontendView> todo;
  for (const bool per_state : {false, true}) {
    FrontendView start;
    start.per_state_deadline = per_state;
    seen.emplace(describe(start), start);
    todo.push_back(start);
  }
  std::size_t transitions = 0;
  while (!todo.empty()) {
    const FrontendView v = todo.back();
    todo.pop_back();
    for (const FrontendEvent& ev : all_events()) {
      const FrontendTransition t = frontend_next(v, ev);
      ++transitions;
      check(v, ev, t);
      if (seen.emplace(describe(t.view), t.view).second) todo.push_back(t.view);
    }
  }
  // The walk must really explore the machine: every phase is reached.
  std::set<P> phases;
  for (const auto& [k, v] : seen) phases.insert(v.phase);
  EXPECT_EQ(phases.size(), kFrontendPhaseCount);
  EXPECT_GT(seen.size(), 100U);
  RecordProperty("reachable_views", static_cast<int>(seen.size()));
  RecordProperty("transitions", static_cast<int>(transitions));
}

// ---- sequences ----------------------------------------------------------------------------------

struct Machine {
  FrontendView view;
  FrontendActions feed(const FrontendEvent& e) {
    FrontendTransition t = frontend_next(view, e);
    view = t.view;
    return t.actions;
  }
};

TEST(FrontendState, ConnectsAtInitWaitAndAnnouncesOnceTheBackendIsConnected) {
  Machine m;
  EXPECT_EQ(m.feed(DomainOpened{S::initialising}), (FrontendActions{ArmConnectDeadline{}}));
  EXPECT_TRUE(m.feed(BackendStateChanged{S::initialising}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}), (FrontendActions{Connect{}}));
  EXPECT_TRUE(m.feed(ConnectSucceeded{}).empty());
  // The backend stays in InitWait until its hotplug script has run: nothing to do.
  EXPECT_TRUE(m.feed(BackendStateChanged{S::init_wait}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::connected}),
            (FrontendActions{CancelConnectDeadline{}, AnnounceConnected{}}));
  EXPECT_EQ(m.view.phase, P::connected);
  EXPECT_TRUE(m.feed(BackendStateChanged{S::connected}).empty());
  EXPECT_TRUE(m.feed(ConnectDeadlineExpired{}).empty());
}

TEST(FrontendState, AFailedConnectIsRetriedAtTheNextBackendState) {
  Machine m{make(P::waiting, S::initialising, false)};
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}), (FrontendActions{Connect{}}));
  EXPECT_TRUE(m.feed(ConnectFailed{}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}), (FrontendActions{Connect{}}));
}

TEST(FrontendState, BackendClosingClosesThenInitialisingOnceClosedThenReconnects) {
  Machine m{make(P::connected, S::connected, true)};
  EXPECT_EQ(m.feed(BackendStateChanged{S::closing}),
            (FrontendActions{BeginClose{CloseReason::backend_closed}, FinishClose{true}}));
  // Not while the backend is still Closing: a coalesced 6->1 would look like no answer.
  EXPECT_TRUE(m.feed(BackendStateChanged{S::closing}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::closed}), (FrontendActions{WriteState{S::initialising}}));
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}), (FrontendActions{Connect{}}));
  EXPECT_TRUE(m.feed(ConnectSucceeded{}).empty());
  // Connected before: no deadline to cancel, the announcement says "reconnected".
  EXPECT_EQ(m.feed(BackendStateChanged{S::connected}), (FrontendActions{AnnounceConnected{}}));
}

TEST(FrontendState, ARestartedBackendInInitWaitIsClosedAndReconnected) {
  Machine m{make(P::connected, S::connected, true)};
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}),
            (FrontendActions{BeginClose{CloseReason::backend_restarted}, ArmCloseDeadline{}}));
  // The backend follows our Closing with 5 and 6 (seen coalesced as 6), then InitWait.
  EXPECT_EQ(m.feed(BackendStateChanged{S::closed}),
            (FrontendActions{FinishClose{true}, WriteState{S::initialising}}));
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}), (FrontendActions{Connect{}}));
}

TEST(FrontendState, ABackendThatNeverFollowsTheCloseIsGivenUpOnAtTheDeadline) {
  Machine m{make(P::connected, S::connected, true)};
  m.feed(BackendStateChanged{S::init_wait});
  EXPECT_EQ(m.feed(CloseDeadlineExpired{}), (FrontendActions{FinishClose{false}}));
  // The loop looks again: the backend is (still) in InitWait.
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}),
            (FrontendActions{WriteState{S::initialising}, Connect{}}));
}

TEST(FrontendState, XdpHeadroomChangeGoesThroughReconfiguringAndBack) {
  Machine m{make(P::connected, S::connected, true)};
  EXPECT_EQ(m.feed(XdpHeadroomRequested{kHeadroom}),
            (FrontendActions{BeginReconfiguration{kHeadroom}}));
  // A second request waits for the first to end.
  EXPECT_TRUE(m.feed(XdpHeadroomRequested{kHeadroom + 1}).empty());
  EXPECT_TRUE(m.feed(BackendStateChanged{S::connected}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::reconfigured}),
            (FrontendActions{EndReconfiguration{true}}));
  EXPECT_EQ(m.view.phase, P::connected);
  // Connected again, the backend follows with 4: nothing more.
  EXPECT_TRUE(m.feed(BackendStateChanged{S::connected}).empty());
}

TEST(FrontendState, SuspendKeepsTheRingsUntilTheVifGoesThenResumeConnectsAfresh) {
  Machine m{make(P::connected, S::connected, true)};
  EXPECT_EQ(m.feed(SuspendRequested{}), (FrontendActions{AcknowledgeSuspend{}}));
  EXPECT_EQ(m.view.phase, P::connected);  // until the acknowledgement is written
  EXPECT_EQ(m.feed(SuspendAcknowledged{}),
            (FrontendActions{StopDataPath{}, CancelCloseDeadline{}, CancelConnectDeadline{}}));
  // The toolstack closes the backend: a suspended domain says nothing.
  EXPECT_TRUE(m.feed(BackendStateChanged{S::closing}).empty());
  EXPECT_TRUE(m.feed(BackendStateChanged{S::closed}).empty());
  EXPECT_EQ(m.feed(VifRemoved{}), (FrontendActions{ReleaseDomain{}}));
  EXPECT_EQ(m.feed(ResumeRequested{kNewDomid}), (FrontendActions{OpenDomain{kNewDomid}}));
  // The new domain's vif is fresh (1); Connected before: no connect deadline again.
  EXPECT_TRUE(m.feed(DomainOpened{S::initialising}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}), (FrontendActions{Connect{}}));
}

TEST(FrontendState, StopWhileConnectedClosesCleanlyThenExits) {
  Machine m{make(P::connected, S::connected, true)};
  EXPECT_EQ(m.feed(StopRequested{kExitClean}),
            (FrontendActions{BeginStop{kExitClean}, CancelConnectDeadline{},
                             BeginClose{CloseReason::stopping}, ArmCloseDeadline{}}));
  EXPECT_TRUE(m.feed(StopRequested{kExitSetupFailure}).empty());  // one stop, its code kept
  EXPECT_TRUE(m.feed(SuspendRequested{}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::closing}),
            (FrontendActions{FinishClose{true}, Exit{kExitClean}}));
  EXPECT_EQ(m.view.phase, P::stopped);
  EXPECT_TRUE(m.feed(BackendStateChanged{S::init_wait}).empty());
}

TEST(FrontendState, TheConnectDeadlineRunsPerBackendStateForWinXenvif) {
  Machine m;
  m.view.per_state_deadline = true;
  EXPECT_EQ(m.feed(DomainOpened{S::initialising}), (FrontendActions{ArmConnectDeadline{}}));
  EXPECT_EQ(m.feed(BackendStateChanged{S::initialising}), (FrontendActions{ArmConnectDeadline{}}));
  EXPECT_TRUE(m.feed(BackendStateChanged{S::initialising}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}),
            (FrontendActions{ArmConnectDeadline{}, Connect{}}));
  EXPECT_TRUE(m.feed(ConnectSucceeded{}).empty());
  EXPECT_EQ(m.feed(ConnectDeadlineExpired{}),
            (FrontendActions{ReportConnectTimeout{}, BeginStop{kExitSetupFailure},
                             CancelConnectDeadline{}, BeginClose{CloseReason::stopping},
                             ArmCloseDeadline{}}));
}

TEST(FrontendState, AStaleFrontendIsResetAndStartsOverOnceTheBackendIsOutOfClosing) {
  Machine m;
  EXPECT_EQ(m.feed(DomainOpened{S::connected}),
            (FrontendActions{ArmConnectDeadline{}, WriteState{S::closed}}));
  EXPECT_TRUE(m.feed(BackendStateChanged{S::closing}).empty());
  EXPECT_EQ(m.feed(BackendStateChanged{S::init_wait}),
            (FrontendActions{WriteState{S::initialising}, Connect{}}));
}

}  // namespace
}  // namespace unetback::shim
