// The pure backend state machine: every (state, event) pair of a set of named views with its
// exact action list; every reachable view x every event against the protocol invariants; every
// possible view (reachable or not) x every event for "no crash, only legal state writes"; and
// the libxl/netfront sequences.
#include "backend/xenbus/backend_state.hpp"

#include <gtest/gtest.h>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/param_name.hpp"

namespace unetback::xenbus {

// gtest finds these by their name.
// NOLINTNEXTLINE(readability-identifier-naming)
void PrintTo(const Action& a, std::ostream* os) {
  *os << describe(a);
}
// NOLINTNEXTLINE(readability-identifier-naming)
void PrintTo(const BackendView& v, std::ostream* os) {
  *os << describe(v);
}

namespace {

using S = XenbusState;

constexpr int kEinval = 22;
constexpr int kEperm = 1;

WriteState write(S s) {
  return WriteState{s};
}

// ---- views ------------------------------------------------------------------------------------

struct NamedView {
  std::string name;
  BackendView view;
};

BackendView make(S backend, std::optional<S> frontend, bool online, bool tap, RingsState rings,
                 HotplugStatus hotplug, bool removed = false, bool shut_down = false) {
  BackendView v;
  v.backend = backend;
  v.frontend = frontend;
  v.online = online;
  v.tap = tap;
  v.rings = rings;
  v.hotplug = hotplug;
  v.removed = removed;
  v.shut_down = shut_down;
  return v;
}

const std::vector<NamedView>& named_views() {
  using R = RingsState;
  using H = HotplugStatus;
  static const std::vector<NamedView> views = {
      {"Unprobed", BackendView{}},
      {"UnprobedFrontendConnected", make(S::unknown, S::connected, true, false, R::down, H::other)},
      {"InitWaitIdle", make(S::init_wait, S::initialising, true, true, R::down, H::other)},
      {"InitWaitConnecting", make(S::init_wait, S::connected, true, true, R::connecting, H::other)},
      {"InitWaitRingsUp", make(S::init_wait, S::connected, true, true, R::up, H::other)},
      {"InitWaitHotplugReady",
       make(S::init_wait, S::initialising, true, true, R::down, H::connected)},
      {"Connected", make(S::connected, S::connected, true, true, R::up, H::connected)},
      {"Reconfigured", make(S::reconfigured, S::reconfiguring, true, true, R::up, H::connected)},
      {"ClosingAfterFatal", make(S::closing, S::connected, true, true, R::down, H::connected)},
      {"ClosedTapKept", make(S::closed, S::closed, true, true, R::down, H::connected)},
      {"Removed", make(S::closed, S::closed, false, false, R::down, H::other, true)},
      {"ShutDown", make(S::closed, S::closed, true, false, R::down, H::connected, false, true)},
  };
  return views;
}

// ---- events -----------------------------------------------------------------------------------

const std::vector<Event>& all_events() {
  static const std::vector<Event> events = [] {
    std::vector<Event> e;
    e.emplace_back(BackendDirAppeared{});
    for (std::uint8_t s = 0; s < kXenbusStateCount; ++s)
      e.emplace_back(FrontendStateChanged{static_cast<S>(s)});
    e.emplace_back(FrontendStateInvalid{});
    e.emplace_back(HotplugStatusChanged{HotplugStatus::connected});
    e.emplace_back(HotplugStatusChanged{HotplugStatus::error});
    e.emplace_back(HotplugStatusChanged{HotplugStatus::other});
    e.emplace_back(OnlineChanged{false});
    e.emplace_back(OnlineChanged{true});
    e.emplace_back(ToolstackSetBackendState{S::initialising, true});
    e.emplace_back(ToolstackSetBackendState{S::connected, true});
    e.emplace_back(ToolstackSetBackendState{S::closing, true});
    e.emplace_back(ToolstackSetBackendState{S::closing, false});
    e.emplace_back(ToolstackSetBackendState{S::closed, false});
    e.emplace_back(FrontendDomainGone{});
    e.emplace_back(ConnectSucceeded{});
    e.emplace_back(ConnectFailed{kEinval, "bad key"});
    e.emplace_back(TapCreateFailed{kEperm, "no tap"});
    e.emplace_back(ProbeFailed{kEinval, "bad frontend"});
    e.emplace_back(DaemonShutdown{});
    e.emplace_back(BackendAdopted{S::connected});
    e.emplace_back(BackendAdopted{S::closed});
    e.emplace_back(ReconfigureFailed{kEinval, "bad headroom"});
    return e;
  }();
  return events;
}

// ---- the expected table -------------------------------------------------------------------------

// An entry: the exact actions, and where backend/tap/rings end up. Pairs not listed are
// "ignored": no actions, and backend, TAP and rings unchanged (inputs may still be recorded).
struct Expect {
  Actions actions;
  S backend;
  bool tap;
  RingsState rings;
};

using Key = std::pair<std::string, std::string>;

std::map<Key, Expect> build_table() {
  using R = RingsState;
  const ReportFatal bad_state{kEinval, "saw an invalid state at frontend"};
  const ReportFatal bad_key{kEinval, "bad key"};
  const ReportFatal no_tap{kEperm, "no tap"};
  const ReportFatal bad_probe{kEinval, "bad frontend"};
  const ReportFatal bad_headroom{kEinval, "bad headroom"};
  const std::string f0 = "FrontendStateChanged(Unknown)", f1 = "FrontendStateChanged(Initialising)",
                    f4 = "FrontendStateChanged(Connected)", f5 = "FrontendStateChanged(Closing)",
                    f6 = "FrontendStateChanged(Closed)", f7 = "FrontendStateChanged(Reconfiguring)";
  const std::string t5on = "ToolstackSetBackendState(Closing, online)",
                    t5off = "ToolstackSetBackendState(Closing, offline)",
                    t6off = "ToolstackSetBackendState(Closed, offline)";
  const std::string hp = "HotplugStatusChanged(connected)", off = "OnlineChanged(0)";
  const std::string probe = "BackendDirAppeared", gone = "FrontendDomainGone",
                    ok = "ConnectSucceeded", cfail = "ConnectFailed(bad key)",
                    tfail = "TapCreateFailed(no tap)", pfail = "ProbeFailed(bad frontend)",
                    inval = "FrontendStateInvalid", stop = "DaemonShutdown",
                    adopt4 = "BackendAdopted(Connected)", adopt6 = "BackendAdopted(Closed)",
                    rfail = "ReconfigureFailed(bad headroom)";
  const Actions removal_from_2 = {write(S::closing), DestroyTap{}, RemoveHotplugStatus{},
                                  write(S::closed)};
  const Actions removal_from_4 = {Disconnect{}, write(S::closing), DestroyTap{},
                                  RemoveHotplugStatus{}, write(S::closed)};

  std::map<Key, Expect> t;
  auto at = [&](const std::string& view, const std::string& event, Expect e) {
    t[{view, event}] = std::move(e);
  };

  // Unprobed: the toolstack has not (visibly) created the directory yet.
  at("Unprobed", probe,
     {{CreateTap{}, AdvertiseFeatures{}, write(S::init_wait)}, S::init_wait, true, R::down});
  at("Unprobed", t5on, {{write(S::closed)}, S::closed, false, R::down});
  at("Unprobed", t5off, {{write(S::closed)}, S::closed, false, R::down});
  at("Unprobed", t6off, {{}, S::closed, false, R::down});
  at("Unprobed", ok, {{Disconnect{}}, S::unknown, false, R::down});
  at("Unprobed", pfail, {{bad_probe, write(S::closing)}, S::closing, false, R::down});
  // Adopted after a restart: tell the frontend the old connection is dead, new TAP, script.
  at("Unprobed", adopt4,
     {{RemoveHotplugStatus{}, write(S::closing), write(S::closed), CreateTap{}, RunHotplugScript{}},
      S::closed,
      true,
      R::down});
  at("Unprobed", adopt6,
     {{RemoveHotplugStatus{}, CreateTap{}, RunHotplugScript{}}, S::closed, true, R::down});

  // The frontend was already Connected when the probe happens: connect right after InitWait.
  const std::string ufc = "UnprobedFrontendConnected";
  at(ufc, probe,
     {{CreateTap{}, AdvertiseFeatures{}, write(S::init_wait), ReadFrontendAndConnect{}},
      S::init_wait,
      true,
      R::connecting});
  at(ufc, t5on, {{write(S::closed)}, S::closed, false, R::down});
  at(ufc, t5off, {{write(S::closed)}, S::closed, false, R::down});
  at(ufc, t6off, {{}, S::closed, false, R::down});
  at(ufc, ok, {{Disconnect{}}, S::unknown, false, R::down});
  at(ufc, pfail, {{bad_probe, write(S::closing)}, S::closing, false, R::down});
  // Its Connected is about the old backend's rings: the same walk, no connect.
  at(ufc, adopt4,
     {{RemoveHotplugStatus{}, write(S::closing), write(S::closed), CreateTap{}, RunHotplugScript{}},
      S::closed,
      true,
      R::down});
  at(ufc, adopt6,
     {{RemoveHotplugStatus{}, CreateTap{}, RunHotplugScript{}}, S::closed, true, R::down});

  // InitWait, frontend Initialising, nothing mapped.
  const std::string iwi = "InitWaitIdle";
  at(iwi, f0, {removal_from_2, S::closed, false, R::down});
  at(iwi, f4, {{ReadFrontendAndConnect{}}, S::init_wait, true, R::connecting});
  at(iwi, f5, {{write(S::closing), write(S::closed)}, S::closed, true, R::down});
  at(iwi, f6, {{write(S::closing), write(S::closed)}, S::closed, true, R::down});
  at(iwi, inval, {{bad_state, write(S::closing)}, S::closing, true, R::down});
  at(iwi, off, {removal_from_2, S::closed, false, R::down});
  at(iwi, t5on, {{write(S::closed)}, S::closed, true, R::down});
  at(iwi, t5off,
     {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  at(iwi, t6off, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(iwi, gone, {removal_from_2, S::closed, false, R::down});
  at(iwi, ok, {{Disconnect{}}, S::init_wait, true, R::down});
  at(iwi, tfail, {{no_tap, write(S::closing)}, S::closing, false, R::down});
  at(iwi, pfail, {{bad_probe, write(S::closing)}, S::closing, true, R::down});
  at(iwi, stop, {{write(S::closing), DestroyTap{}, write(S::closed)}, S::closed, false, R::down});

  // InitWait with a connect outstanding, and with the rings up but no hotplug yet: the same
  // teardowns, each starting with Disconnect.
  for (const std::string v : {"InitWaitConnecting", "InitWaitRingsUp"}) {
    at(v, f0, {removal_from_4, S::closed, false, R::down});
    at(v, f1, {{Disconnect{}}, S::init_wait, true, R::down});
    at(v, f5, {{Disconnect{}, write(S::closing), write(S::closed)}, S::closed, true, R::down});
    at(v, f6, {{Disconnect{}, write(S::closing), write(S::closed)}, S::closed, true, R::down});
    at(v, inval, {{bad_state, Disconnect{}, write(S::closing)}, S::closing, true, R::down});
    at(v, off, {removal_from_4, S::closed, false, R::down});
    at(v, t5on, {{Disconnect{}, write(S::closed)}, S::closed, true, R::down});
    at(v, t5off,
       {{Disconnect{}, DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)},
        S::closed,
        false,
        R::down});
    at(v, t6off, {{Disconnect{}, DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
    at(v, gone, {removal_from_4, S::closed, false, R::down});
    at(v, tfail, {{no_tap, Disconnect{}, write(S::closing)}, S::closing, false, R::down});
    at(v, pfail, {{bad_probe, Disconnect{}, write(S::closing)}, S::closing, true, R::down});
    at(v, stop,
       {{Disconnect{}, write(S::closing), DestroyTap{}, write(S::closed)},
        S::closed,
        false,
        R::down});
  }
  // Rings up, hotplug not yet connected: connect result arrives -> wait for hotplug.
  at("InitWaitConnecting", ok, {{}, S::init_wait, true, R::up});
  at("InitWaitConnecting", cfail, {{bad_key, write(S::closing)}, S::closing, true, R::down});
  // Rings up, then hotplug-status=connected: the last condition -> Connected.
  at("InitWaitRingsUp", hp, {{write(S::connected)}, S::connected, true, R::up});

  // InitWait, the hotplug script done, the frontend not yet Connected.
  const std::string iwh = "InitWaitHotplugReady";
  at(iwh, f0, {removal_from_2, S::closed, false, R::down});
  at(iwh, f4, {{ReadFrontendAndConnect{}}, S::init_wait, true, R::connecting});
  at(iwh, f5, {{write(S::closing), write(S::closed)}, S::closed, true, R::down});
  at(iwh, f6, {{write(S::closing), write(S::closed)}, S::closed, true, R::down});
  at(iwh, inval, {{bad_state, write(S::closing)}, S::closing, true, R::down});
  at(iwh, off, {removal_from_2, S::closed, false, R::down});
  at(iwh, t5on, {{write(S::closed)}, S::closed, true, R::down});
  at(iwh, t5off,
     {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  at(iwh, t6off, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(iwh, gone, {removal_from_2, S::closed, false, R::down});
  at(iwh, ok, {{Disconnect{}}, S::init_wait, true, R::down});
  at(iwh, tfail, {{no_tap, write(S::closing)}, S::closing, false, R::down});
  at(iwh, pfail, {{bad_probe, write(S::closing)}, S::closing, true, R::down});
  at(iwh, stop, {{write(S::closing), DestroyTap{}, write(S::closed)}, S::closed, false, R::down});

  // Connected, and Reconfigured (8: the frontend is changing its xdp-headroom): the same
  // teardowns, the rings up in both.
  const std::string con = "Connected", rec = "Reconfigured";
  for (const std::string& v : {con, rec}) {
    at(v, f0, {removal_from_4, S::closed, false, R::down});
    // A frontend starting over without closing: walk 4 -> 5 -> 6 -> 2, as set_backend_state.
    at(v, f1,
       {{Disconnect{}, write(S::closing), write(S::closed), write(S::init_wait)},
        S::init_wait,
        true,
        R::down});
    at(v, f5, {{Disconnect{}, write(S::closing), write(S::closed)}, S::closed, true, R::down});
    at(v, f6, {{Disconnect{}, write(S::closing), write(S::closed)}, S::closed, true, R::down});
    at(v, inval, {{bad_state, Disconnect{}, write(S::closing)}, S::closing, true, R::down});
    at(v, off, {removal_from_4, S::closed, false, R::down});
    at(v, t5on, {{Disconnect{}, write(S::closed)}, S::closed, true, R::down});
    at(v, t5off,
       {{Disconnect{}, DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)},
        S::closed,
        false,
        R::down});
    at(v, t6off, {{Disconnect{}, DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
    at(v, gone, {removal_from_4, S::closed, false, R::down});
    at(v, stop,
       {{Disconnect{}, write(S::closing), DestroyTap{}, write(S::closed)},
        S::closed,
        false,
        R::down});
    // A headroom we cannot honour: the frontend's error, as a bad key at connect.
    at(v, rfail, {{bad_headroom, Disconnect{}, write(S::closing)}, S::closing, true, R::down});
  }
  // XDP headroom: netfront's 7 re-reads the key and is answered with 8, the rings stay up;
  // its 4 afterwards reads the key once more (Linux netfront writes it after its 7) and is
  // followed back to Connected.
  at(con, f7, {{ApplyXdpHeadroom{}, write(S::reconfigured)}, S::reconfigured, true, R::up});
  at(rec, f4, {{ApplyXdpHeadroom{}, write(S::connected)}, S::connected, true, R::up});

  // Closing after a fatal error, the frontend not yet reacting.
  const std::string caf = "ClosingAfterFatal";
  at(caf, f0, {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  // F=1/F=4 are ignored here: a frontend must acknowledge our Closing with Closed before it
  // starts over, or a frontend that never saw our Closing would loop through fatal errors.
  at(caf, f5, {{write(S::closed)}, S::closed, true, R::down});
  at(caf, f6, {{write(S::closed)}, S::closed, true, R::down});
  at(caf, off,
     {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  at(caf, t5off,
     {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  at(caf, t6off, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(caf, gone,
     {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  at(caf, ok, {{Disconnect{}}, S::closing, true, R::down});
  at(caf, stop, {{DestroyTap{}, write(S::closed)}, S::closed, false, R::down});

  // Closed after the frontend closed, TAP kept for a reconnect.
  const std::string ctk = "ClosedTapKept";
  at(ctk, f0, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(ctk, f1, {{write(S::init_wait)}, S::init_wait, true, R::down});
  at(ctk, f4, {{write(S::init_wait), ReadFrontendAndConnect{}}, S::init_wait, true, R::connecting});
  at(ctk, off, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(ctk, t5on, {{write(S::closed)}, S::closed, true, R::down});
  at(ctk, t5off,
     {{DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}, S::closed, false, R::down});
  at(ctk, t6off, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(ctk, gone, {{DestroyTap{}, RemoveHotplugStatus{}}, S::closed, false, R::down});
  at(ctk, ok, {{Disconnect{}}, S::closed, true, R::down});
  at(ctk, stop, {{DestroyTap{}}, S::closed, false, R::down});
  // Only an adoption creates a TAP on the way to Closed: its failure is reported, B stays 6.
  at(ctk, tfail, {{no_tap}, S::closed, false, R::down});

  // Removed: only a fresh probe (or libxl rewriting 5 over our 6) does anything.
  at("Removed", probe,
     {{CreateTap{}, AdvertiseFeatures{}, write(S::init_wait)}, S::init_wait, true, R::down});
  at("Removed", t5on, {{write(S::closed)}, S::closed, false, R::down});
  at("Removed", t5off, {{write(S::closed)}, S::closed, false, R::down});
  at("Removed", ok, {{Disconnect{}}, S::closed, false, R::down});

  // ShutDown: nothing at all.
  return t;
}

const std::map<Key, Expect>& table() {
  static const std::map<Key, Expect> t = build_table();
  return t;
}

class EveryStateEveryEvent : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {
};

TEST_P(EveryStateEveryEvent, GivesExactlyTheExpectedActions) {
  const auto [vi, ei] = GetParam();
  const NamedView& nv = named_views()[vi];
  const Event& ev = all_events()[ei];
  const Transition t = next(nv.view, ev);
  auto it = table().find({nv.name, describe(ev)});
  if (it == table().end()) {
    EXPECT_TRUE(t.actions.empty()) << nv.name << " + " << describe(ev) << " must be ignored";
    EXPECT_EQ(t.view.backend, nv.view.backend);
    EXPECT_EQ(t.view.tap, nv.view.tap);
    EXPECT_EQ(t.view.rings, nv.view.rings);
  } else {
    EXPECT_EQ(t.actions, it->second.actions) << nv.name << " + " << describe(ev);
    EXPECT_EQ(t.view.backend, it->second.backend);
    EXPECT_EQ(t.view.tap, it->second.tap);
    EXPECT_EQ(t.view.rings, it->second.rings);
  }
}

std::string pair_name(const ::testing::TestParamInfo<std::tuple<std::size_t, std::size_t>>& info) {
  return test::gtest_safe_name(named_views()[std::get<0>(info.param)].name + "_" +
                               describe(all_events()[std::get<1>(info.param)]));
}

INSTANTIATE_TEST_SUITE_P(BackendState, EveryStateEveryEvent,
                         ::testing::Combine(::testing::Range<std::size_t>(0, named_views().size()),
                                            ::testing::Range<std::size_t>(0, all_events().size())),
                         pair_name);

TEST(BackendState, TableCoversTheNamedViewsAndEvents) {
  ASSERT_EQ(named_views().size(), 12U);
  ASSERT_EQ(all_events().size(), 30U);
  // Every table entry names a real (view, event) pair: no typo hides an expectation.
  std::set<std::string> views, events;
  for (const auto& v : named_views()) views.insert(v.name);
  for (const auto& e : all_events()) events.insert(describe(e));
  for (const auto& [key, expect] : table()) {
    EXPECT_TRUE(views.count(key.first)) << key.first;
    EXPECT_TRUE(events.count(key.second)) << key.second;
  }
}

// ---- invariants
// -----------------------------------------------------------------------------------

bool legal_edge(S from, S to) {
  switch (from) {
    case S::unknown:
    case S::initialising: return to == S::init_wait || to == S::closing;
    case S::init_wait: return to == S::connected || to == S::closing;
    case S::connected: return to == S::closing || to == S::reconfigured;
    case S::reconfigured: return to == S::closing || to == S::connected;
    case S::closing: return to == S::closed;
    case S::closed: return to == S::init_wait;
    case S::initialised:
    case S::reconfiguring: return to == S::closing;
  }
  return false;
}

// Checks that hold for any view, reachable or not.
void check_weak(const BackendView& before, const Event& ev, const Transition& t) {
  const std::string ctx = describe(before) + " + " + describe(ev);
  S at = before.backend;
  if (const auto* ts = std::get_if<ToolstackSetBackendState>(&ev);
      ts != nullptr && (ts->state == S::closing || ts->state == S::closed) && !before.shut_down &&
      before.backend != ts->state) {
    at = ts->state;  // the toolstack moved it; our walk starts there
  }
  if (const auto* ad = std::get_if<BackendAdopted>(&ev);
      ad != nullptr && before.backend == S::unknown && !before.removed && !before.shut_down &&
      ad->found != S::unknown && ad->found != S::initialising) {
    at = ad->found;  // an earlier daemon left it there
  }
  for (std::size_t i = 0; i < t.actions.size(); ++i) {
    const Action& a = t.actions[i];
    if (const auto* w = std::get_if<WriteState>(&a)) {
      EXPECT_TRUE(legal_edge(at, w->state))
          << ctx << ": illegal write " << state_name(at) << " -> " << state_name(w->state);
      if (w->state == S::connected) {
        EXPECT_EQ(t.view.rings, RingsState::up) << ctx;
        EXPECT_EQ(t.view.frontend, S::connected) << ctx;
        // The first Connected waits for the hotplug script too; the way back from
        // Reconfigured does not (the script ran long ago; Linux dropped its watch then).
        if (at != S::reconfigured) {
          EXPECT_EQ(t.view.hotplug, HotplugStatus::connected) << ctx;
        }
      }
      // Reconfiguring is served only on live rings, each time re-reading the key first.
      if (w->state == S::reconfigured || (at == S::reconfigured && w->state == S::connected)) {
        EXPECT_EQ(t.view.rings, RingsState::up) << ctx;
        EXPECT_TRUE(i > 0 && std::holds_alternative<ApplyXdpHeadroom>(t.actions[i - 1])) << ctx;
      }
      at = w->state;
    }
    if (std::holds_alternative<ReadFrontendAndConnect>(a)) {
      EXPECT_EQ(i + 1, t.actions.size()) << ctx << ": ReadFrontendAndConnect must be last";
    }
    if (std::holds_alternative<ApplyXdpHeadroom>(a)) {
      EXPECT_TRUE(at == S::connected || at == S::reconfigured) << ctx;
    }
  }
  EXPECT_EQ(at, t.view.backend) << ctx;
  if (before.shut_down) {
    EXPECT_TRUE(t.actions.empty()) << ctx;
  }
}

// Checks that hold from every reachable view.
void check_strong(const BackendView& before, const Event& ev, const Transition& t) {
  check_weak(before, ev, t);
  const std::string ctx = describe(before) + " + " + describe(ev);
  const BackendView& v = t.view;
  if (v.rings != RingsState::down) {
    EXPECT_TRUE(v.backend == S::init_wait || v.backend == S::connected ||
                v.backend == S::reconfigured)
        << ctx;
  }
  // Connected is entered only with all three conditions (check_weak); once there, a later
  // hotplug-status rewrite or a frontend 3/7/8 is ignored, as Linux drops its hotplug watch.
  if (v.backend == S::connected || v.backend == S::reconfigured) {
    EXPECT_EQ(v.rings, RingsState::up) << ctx;
  }
  if (v.backend == S::init_wait || v.backend == S::connected || v.backend == S::reconfigured) {
    EXPECT_TRUE(v.tap) << ctx;
    EXPECT_TRUE(v.online) << ctx;
    EXPECT_FALSE(v.removed) << ctx;
  }
  if (v.removed) {
    EXPECT_FALSE(v.tap) << ctx;
    EXPECT_EQ(v.rings, RingsState::down) << ctx;
  }
  if (v.shut_down) {
    EXPECT_FALSE(v.tap) << ctx;
    EXPECT_EQ(v.rings, RingsState::down) << ctx;
  }

  int creates = 0, destroys = 0, disconnects = 0, connects = 0;
  bool tap_seen = before.tap;
  for (const Action& a : t.actions) {
    if (std::holds_alternative<CreateTap>(a)) {
      ++creates;
      tap_seen = true;
    }
    if (std::holds_alternative<DestroyTap>(a)) ++destroys;
    if (std::holds_alternative<Disconnect>(a)) ++disconnects;
    if (std::holds_alternative<ReadFrontendAndConnect>(a)) ++connects;
    // The hotplug script runs when libxl sees InitWait and needs the TAP by then.
    if (const auto* w = std::get_if<WriteState>(&a); w != nullptr && w->state == S::init_wait) {
      EXPECT_TRUE(tap_seen) << ctx << ": InitWait written before the TAP exists";
    }
  }
  EXPECT_EQ(creates, !before.tap && v.tap ? 1 : 0) << ctx;
  const bool tap_failed = std::holds_alternative<TapCreateFailed>(ev);
  EXPECT_EQ(destroys, before.tap && !v.tap && !tap_failed ? 1 : 0) << ctx;
  const bool undo = std::holds_alternative<ConnectSucceeded>(ev) &&
                    before.rings == RingsState::down && !before.shut_down;
  // A failed connect left nothing behind (VifControl::connect is all-or-nothing).
  const bool failed_connect =
      std::holds_alternative<ConnectFailed>(ev) && before.rings == RingsState::connecting;
  EXPECT_EQ(
      disconnects,
      (before.rings != RingsState::down && v.rings == RingsState::down && !failed_connect) || undo
          ? 1
          : 0)
      << ctx;
  EXPECT_EQ(connects,
            before.rings != RingsState::connecting && v.rings == RingsState::connecting ? 1 : 0)
      << ctx;
}

// Replaying an event right after itself does nothing more (watches fire twice, values are
// re-read). Not for ToolstackSetBackendState (a second write of 5 over our 6 is news) nor a
// stray ConnectSucceeded (each one is undone).
bool idempotent(const Event& ev) {
  return !std::holds_alternative<ToolstackSetBackendState>(ev) &&
         !std::holds_alternative<ConnectSucceeded>(ev);
}

std::string key_of(const BackendView& v) {
  return describe(v);
}

TEST(BackendState, EveryReachableViewAndEventKeepsTheInvariants) {
  std::map<std::string, BackendView> seen;
  std::vector<BackendView> todo{BackendView{}};
  seen.emplace(key_of(BackendView{}), BackendView{});
  std::size_t transitions = 0;
  while (!todo.empty()) {
    const BackendView v = todo.back();
    todo.pop_back();
    for (const Event& ev : all_events()) {
      const Transition t = next(v, ev);
      ++transitions;
      check_strong(v, ev, t);
      if (idempotent(ev)) {
        const Transition again = next(t.view, ev);
        EXPECT_TRUE(again.actions.empty()) << describe(v) << " + " << describe(ev) << " twice";
      }
      if (seen.emplace(key_of(t.view), t.view).second) todo.push_back(t.view);
    }
  }
  // The walk must really explore the machine, not stop at the initial view.
  EXPECT_GT(seen.size(), 50U);
  EXPECT_TRUE(seen.count(key_of(named_views()[6].view))) << "Connected must be reachable";
  EXPECT_TRUE(seen.count(key_of(named_views()[7].view))) << "Reconfigured must be reachable";
  RecordProperty("reachable_views", static_cast<int>(seen.size()));
  RecordProperty("transitions", static_cast<int>(transitions));
}

TEST(BackendState, EveryPossibleViewAndEventWritesOnlyLegalStates) {
  std::size_t n = 0;
  for (std::uint8_t b = 0; b < kXenbusStateCount; ++b) {
    for (int f = -1; f < kXenbusStateCount; ++f) {
      for (int bits = 0; bits < 32; ++bits) {
        for (int r = 0; r < 3; ++r) {
          for (int h = 0; h < 3; ++h) {
            BackendView v;
            v.backend = static_cast<S>(b);
            if (f >= 0) v.frontend = static_cast<S>(f);
            v.online = (bits & 1) != 0;
            v.tap = (bits & 2) != 0;
            v.removed = (bits & 4) != 0;
            v.shut_down = (bits & 8) != 0;
            v.stale_frontend = (bits & 16) != 0;
            v.rings = static_cast<RingsState>(r);
            v.hotplug = static_cast<HotplugStatus>(h);
            for (const Event& ev : all_events()) {
              check_weak(v, ev, next(v, ev));
              ++n;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(n, 9U * 10 * 32 * 3 * 3 * 30);
}

// ---- sequences ----------------------------------------------------------------------------------

struct Machine {
  BackendView view;
  Actions feed(const Event& e) {
    Transition t = next(view, e);
    view = t.view;
    return t.actions;
  }
};

TEST(BackendState, LibxlAndNetfrontHappyPath) {
  Machine m;
  EXPECT_TRUE(m.feed(OnlineChanged{true}).empty());
  EXPECT_TRUE(m.feed(FrontendStateChanged{S::initialising}).empty());
  EXPECT_EQ(m.feed(BackendDirAppeared{}),
            (Actions{CreateTap{}, AdvertiseFeatures{}, write(S::init_wait)}));
  // netfront sees InitWait, writes its keys and goes straight to 4.
  EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}), (Actions{ReadFrontendAndConnect{}}));
  EXPECT_TRUE(m.feed(ConnectSucceeded{}).empty()) << "no Connected before hotplug-status";
  EXPECT_EQ(m.feed(HotplugStatusChanged{HotplugStatus::connected}), (Actions{write(S::connected)}));
  EXPECT_EQ(m.view.backend, S::connected);
  // libxl's removal: online=0 and state=5 in one transaction.
  EXPECT_EQ(m.feed(ToolstackSetBackendState{S::closing, false}),
            (Actions{Disconnect{}, DestroyTap{}, RemoveHotplugStatus{}, write(S::closed)}));
  EXPECT_TRUE(m.feed(OnlineChanged{false}).empty());
  EXPECT_TRUE(m.view.removed);
}

// Linux netfront's xennet_xdp_set, twice (XDP attached, then detached): 7, (key), wait for 8,
// 4. The rings are never released, and each step re-reads xdp-headroom.
TEST(BackendState, NetfrontChangingItsXdpHeadroomPassesReconfiguredAndKeepsItsRings) {
  Machine m;
  (void)m.feed(BackendDirAppeared{});
  (void)m.feed(FrontendStateChanged{S::connected});
  (void)m.feed(ConnectSucceeded{});
  ASSERT_EQ(m.feed(HotplugStatusChanged{HotplugStatus::connected}), (Actions{write(S::connected)}));
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(m.feed(FrontendStateChanged{S::reconfiguring}),
              (Actions{ApplyXdpHeadroom{}, write(S::reconfigured)}))
        << "round " << round;
    EXPECT_EQ(m.view.rings, RingsState::up);
    // A hotplug-status rewrite meanwhile changes nothing (the script ran at connect).
    EXPECT_TRUE(m.feed(HotplugStatusChanged{HotplugStatus::other}).empty());
    EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}),
              (Actions{ApplyXdpHeadroom{}, write(S::connected)}))
        << "round " << round;
    EXPECT_EQ(m.view.rings, RingsState::up);
  }
  // A frontend that has not connected yet has nothing to reconfigure: its connect reads the key.
  Machine early;
  (void)early.feed(BackendDirAppeared{});
  EXPECT_TRUE(early.feed(FrontendStateChanged{S::reconfiguring}).empty());
  EXPECT_EQ(early.view.backend, S::init_wait);
}

TEST(BackendState, AHeadroomRefusedWhileReconfiguringIsFatalAndTheFrontendMayStartOver) {
  Machine m;
  (void)m.feed(BackendDirAppeared{});
  (void)m.feed(FrontendStateChanged{S::connected});
  (void)m.feed(ConnectSucceeded{});
  (void)m.feed(HotplugStatusChanged{HotplugStatus::connected});
  (void)m.feed(FrontendStateChanged{S::reconfiguring});
  EXPECT_EQ(m.feed(ReconfigureFailed{kEinval, "xdp-headroom: above 0x7FFF"}),
            (Actions{ReportFatal{kEinval, "xdp-headroom: above 0x7FFF"}, Disconnect{},
                     write(S::closing)}));
  EXPECT_TRUE(m.view.tap) << "a frontend error keeps the TAP";
  // A stale result after the teardown is ignored.
  EXPECT_TRUE(m.feed(ReconfigureFailed{kEinval, "again"}).empty());
  EXPECT_EQ(m.feed(FrontendStateChanged{S::closed}), (Actions{write(S::closed)}));
  EXPECT_EQ(m.feed(FrontendStateChanged{S::initialising}), (Actions{write(S::init_wait)}));
}

TEST(BackendState, AdoptedAfterACrashIgnoresTheStaleConnectedUntilTheFrontendStartsOver) {
  Machine m;
  // The old daemon died with B=4; the frontend still says 4 about rings nobody serves.
  EXPECT_EQ(m.feed(BackendAdopted{S::connected}),
            (Actions{RemoveHotplugStatus{}, write(S::closing), write(S::closed), CreateTap{},
                     RunHotplugScript{}}));
  EXPECT_TRUE(m.feed(FrontendStateChanged{S::connected}).empty()) << "stale: no connect";
  EXPECT_TRUE(m.feed(HotplugStatusChanged{HotplugStatus::connected}).empty());
  // The frontend saw Closing: it closes, then starts over.
  EXPECT_TRUE(m.feed(FrontendStateChanged{S::closing}).empty());
  EXPECT_TRUE(m.feed(FrontendStateChanged{S::closed}).empty());
  EXPECT_EQ(m.feed(FrontendStateChanged{S::initialising}), (Actions{write(S::init_wait)}));
  EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}), (Actions{ReadFrontendAndConnect{}}));
  EXPECT_EQ(m.feed(ConnectSucceeded{}), (Actions{write(S::connected)}));
}

TEST(BackendState, AdoptedAfterAnOrderlyExitWithTheFrontendWaitingGoesToInitWait) {
  Machine m;
  // An orderly exit wrote 6; the frontend acknowledged and said 1 before the new daemon came.
  m.feed(FrontendStateChanged{S::initialising});
  EXPECT_EQ(m.feed(BackendAdopted{S::closed}),
            (Actions{RemoveHotplugStatus{}, CreateTap{}, RunHotplugScript{}, write(S::init_wait)}));
  EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}), (Actions{ReadFrontendAndConnect{}}));
  EXPECT_TRUE(m.feed(ConnectSucceeded{}).empty()) << "the script has not reported yet";
  EXPECT_EQ(m.feed(HotplugStatusChanged{HotplugStatus::connected}), (Actions{write(S::connected)}));
}

TEST(BackendState, AdoptionFailingToCreateTheTapIsFatal) {
  Machine m;
  m.feed(BackendAdopted{S::connected});
  EXPECT_EQ(m.feed(TapCreateFailed{kEperm, "no tap"}), (Actions{ReportFatal{kEperm, "no tap"}}));
  EXPECT_FALSE(m.view.tap);
  // A frontend starting over asks for it again.
  m.feed(FrontendStateChanged{S::closed});
  EXPECT_EQ(m.feed(FrontendStateChanged{S::initialising}),
            (Actions{CreateTap{}, write(S::init_wait)}));
}

TEST(BackendState, RemovalSeenThroughOnlineFirstReleasesEverythingBeforeClosed) {
  Machine m;
  m.feed(BackendDirAppeared{});
  m.feed(HotplugStatusChanged{HotplugStatus::connected});
  m.feed(FrontendStateChanged{S::connected});
  m.feed(ConnectSucceeded{});
  ASSERT_EQ(m.view.backend, S::connected);
  EXPECT_EQ(m.feed(OnlineChanged{false}), (Actions{Disconnect{}, write(S::closing), DestroyTap{},
                                                   RemoveHotplugStatus{}, write(S::closed)}));
  EXPECT_TRUE(m.feed(ToolstackSetBackendState{S::closed, false}).empty());
}

TEST(BackendState, HotplugBeforeFrontendConnects) {
  Machine m;
  m.feed(BackendDirAppeared{});
  EXPECT_TRUE(m.feed(HotplugStatusChanged{HotplugStatus::connected}).empty());
  EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}), (Actions{ReadFrontendAndConnect{}}));
  EXPECT_EQ(m.feed(ConnectSucceeded{}), (Actions{write(S::connected)}));
}

TEST(BackendState, FrontendConnectedBeforeProbeConnectsRightAfterInitWait) {
  Machine m;
  m.feed(FrontendStateChanged{S::connected});
  EXPECT_EQ(m.feed(BackendDirAppeared{}), (Actions{CreateTap{}, AdvertiseFeatures{},
                                                   write(S::init_wait), ReadFrontendAndConnect{}}));
}

TEST(BackendState, FrontendReconnectsAfterCloseWithoutRecreatingTheTap) {
  Machine m;
  m.feed(BackendDirAppeared{});
  m.feed(FrontendStateChanged{S::connected});
  m.feed(ConnectSucceeded{});
  m.feed(HotplugStatusChanged{HotplugStatus::connected});
  ASSERT_EQ(m.view.backend, S::connected);
  EXPECT_EQ(m.feed(FrontendStateChanged{S::closing}),
            (Actions{Disconnect{}, write(S::closing), write(S::closed)}));
  EXPECT_TRUE(m.feed(FrontendStateChanged{S::closed}).empty());
  EXPECT_EQ(m.feed(FrontendStateChanged{S::initialising}), (Actions{write(S::init_wait)}));
  EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}), (Actions{ReadFrontendAndConnect{}}));
  // The hotplug script ran once; its "connected" still stands.
  EXPECT_EQ(m.feed(ConnectSucceeded{}), (Actions{write(S::connected)}));
}

TEST(BackendState, CoalescedRestartSeenAsClosedThenConnectedStillReconnects) {
  Machine m;
  m.feed(BackendDirAppeared{});
  m.feed(FrontendStateChanged{S::connected});
  m.feed(ConnectSucceeded{});
  m.feed(HotplugStatusChanged{HotplugStatus::connected});
  m.feed(FrontendStateChanged{S::closed});
  EXPECT_EQ(m.feed(FrontendStateChanged{S::connected}),
            (Actions{write(S::init_wait), ReadFrontendAndConnect{}}));
}

TEST(BackendState, FatalConnectErrorClosesAndAllowsARetry) {
  Machine m;
  m.feed(BackendDirAppeared{});
  m.feed(FrontendStateChanged{S::connected});
  EXPECT_EQ(m.feed(ConnectFailed{kEinval, "reading multi-queue-num-queues"}),
            (Actions{ReportFatal{kEinval, "reading multi-queue-num-queues"}, write(S::closing)}));
  // netfront answers Closing with Closed.
  EXPECT_EQ(m.feed(FrontendStateChanged{S::closed}), (Actions{write(S::closed)}));
  EXPECT_TRUE(m.view.tap);
  EXPECT_EQ(m.feed(FrontendStateChanged{S::initialising}), (Actions{write(S::init_wait)}));
}

TEST(BackendState, TapFailureAtProbeNeverReachesInitWait) {
  Machine m;
  const Actions probe = m.feed(BackendDirAppeared{});
  ASSERT_EQ(probe.front(), Action{CreateTap{}});
  // The adapter stops the list at the failed CreateTap.
  EXPECT_EQ(m.feed(TapCreateFailed{kEperm, "creating vif5.0"}),
            (Actions{ReportFatal{kEperm, "creating vif5.0"}, write(S::closing)}));
  EXPECT_FALSE(m.view.tap);
  // The frontend's first state (1, written by libxl) is not a restart.
  EXPECT_TRUE(m.feed(FrontendStateChanged{S::initialising}).empty());
  // libxl times out and removes the device: the toolstack's 5 equals ours, online=0 is news;
  // there is no TAP to destroy.
  EXPECT_EQ(m.feed(ToolstackSetBackendState{S::closing, false}),
            (Actions{RemoveHotplugStatus{}, write(S::closed)}));
  EXPECT_TRUE(m.feed(OnlineChanged{false}).empty());
}

TEST(BackendState, NothingHappensAfterShutdown) {
  Machine m;
  m.feed(BackendDirAppeared{});
  m.feed(DaemonShutdown{});
  for (const Event& ev : all_events()) EXPECT_TRUE(m.feed(ev).empty()) << describe(ev);
}

}  // namespace
}  // namespace unetback::xenbus
