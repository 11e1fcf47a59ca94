#include "backend/xenbus/backend_state.hpp"

#include <type_traits>

namespace unetback::xenbus {
namespace {

// Walks B:state along the only edges the backend ever takes, one WriteState per edge, with the
// side effects each edge needs, like Linux netback's set_backend_state(): a jump from Connected
// to InitWait goes through Closing and Closed, so the frontend always sees a coherent sequence.
class Walker {
 public:
  explicit Walker(const BackendView& v) : v_(v) {}

  BackendView& view() { return v_; }
  Transition finish() && { return {v_, std::move(actions_)}; }
  // Constructed in place: moving a whole Action variant trips GCC 12's -Wmaybe-uninitialized.
  template <typename A>
  void emit(A a) {
    actions_.emplace_back(std::in_place_type<A>, std::move(a));
  }

  void disconnect_if_needed() {
    if (v_.rings == RingsState::down) return;
    emit(Disconnect{});
    v_.rings = RingsState::down;
  }

  // Unknown(=the toolstack's 1)/Closed -> InitWait. The TAP must exist before state 2: libxl
  // runs the hotplug script as soon as it sees InitWait, and the script needs the netdev.
  void to_init_wait() {
    switch (v_.backend) {
      case XenbusState::init_wait: return;
      case XenbusState::unknown:
      case XenbusState::initialising:
        create_tap_if_needed();
        emit(AdvertiseFeatures{});
        write(XenbusState::init_wait);
        return;
      case XenbusState::closed:
        // Features are still in the directory from the probe; only the TAP may be missing.
        create_tap_if_needed();
        write(XenbusState::init_wait);
        return;
      case XenbusState::initialised:
      case XenbusState::connected:
      case XenbusState::closing:
      case XenbusState::reconfiguring:
      case XenbusState::reconfigured:
        to_closed(/*removal=*/false);
        to_init_wait();
        return;
    }
  }

  // InitWait -> Connected, gated: rings mapped AND F=Connected AND hotplug-status=connected,
  // whichever arrives last.
  void try_connect() {
    if (v_.backend != XenbusState::init_wait) return;
    if (v_.frontend != XenbusState::connected) return;
    if (v_.rings == RingsState::down) {
      emit(ReadFrontendAndConnect{});
      v_.rings = RingsState::connecting;
      return;
    }
    if (v_.rings == RingsState::up && v_.hotplug == HotplugStatus::connected) {
      write(XenbusState::connected);
    }
  }

  void to_closing() {
    disconnect_if_needed();
    if (v_.backend == XenbusState::closing || v_.backend == XenbusState::closed) return;
    write(XenbusState::closing);
  }

  // `removal`: the device goes away for good (online=0, frontend Unknown, domain gone): the TAP
  // goes too, before state 6, so that everything is released when libxl sees Closed.
  void to_closed(bool removal) {
    if (v_.backend != XenbusState::closed) to_closing();
    disconnect_if_needed();
    if (removal) {
      if (v_.tap) {
        emit(DestroyTap{});
        v_.tap = false;
      }
      if (!v_.removed) emit(RemoveHotplugStatus{});
      v_.removed = true;
    }
    if (v_.backend != XenbusState::closed) write(XenbusState::closed);
  }

  void fatal(int error, std::string message) {
    emit(ReportFatal{error, std::move(message)});
    to_closing();
  }

  void create_tap_if_needed() {
    if (v_.tap) return;
    emit(CreateTap{});
    v_.tap = true;
  }

  void write(XenbusState s) {
    emit(WriteState{s});
    v_.backend = s;
  }

 private:
  BackendView v_;
  Actions actions_;
};

bool probed(const BackendView& v) {
  return v.backend != XenbusState::unknown;
}

bool closing_or_closed(XenbusState s) {
  return s == XenbusState::closing || s == XenbusState::closed;
}

void on(Walker& w, const BackendDirAppeared&) {
  BackendView& v = w.view();
  // A duplicate (the toolstack rewrote 1, or both our watches fired) changes nothing; a probe
  // after a removal in the same directory starts over.
  if (probed(v) && !(v.removed && v.backend == XenbusState::closed)) return;
  v.online = true;
  v.removed = false;
  v.backend = XenbusState::unknown;
  w.to_init_wait();
  // The frontend may already be Connected (it was read before the probe completed).
  w.try_connect();
}

void on(Walker& w, const FrontendStateChanged& e) {
  BackendView& v = w.view();
  // The adapter reads F:state when its watch fires; the same value twice is no news.
  if (v.frontend == e.state) return;
  v.frontend = e.state;
  if (!probed(v) || v.removed) return;
  if (v.stale_frontend) {
    // Adopted: its Connected is about the old backend's rings. Anything else is news.
    if (e.state == XenbusState::connected) return;
    v.stale_frontend = false;
  }
  switch (e.state) {
    case XenbusState::initialising:
      // A frontend starting over (guest reboot, driver reload) after Closed or a fatal error:
      // offer InitWait again, keeping the TAP. If it starts over while we are mapped, its old
      // rings are gone: drop them.
      // From Closing (after our fatal error) the frontend must first acknowledge with Closed,
      // like blkback's "prepare for reconnect" only from Closed: its Initialising may be the
      // state it has had all along, not a restart.
      if (!v.online || v.backend == XenbusState::closing) return;
      if (v.backend == XenbusState::init_wait) {
        w.disconnect_if_needed();
        return;
      }
      w.to_init_wait();
      return;
    case XenbusState::connected:
      if (!v.online) return;
      if (v.backend == XenbusState::reconfigured && v.rings == RingsState::up) {
        // The end of a reconfiguration: netfront wrote the key before it waited for our 8,
        // and Linux netfront writes it only after its 7, so the read on 7 may have been too
        // early. Read it once more, then follow the frontend back to Connected.
        w.emit(ApplyXdpHeadroom{});
        w.write(XenbusState::connected);
        return;
      }
      // netfront goes 1 -> 4 directly once it sees InitWait. Coalesced watch events can also
      // hide a 6 -> 1 -> 4 restart as 6 -> 4: walk back to InitWait first.
      if (v.backend == XenbusState::connected || v.backend == XenbusState::closing) return;
      w.to_init_wait();
      w.try_connect();
      return;
    case XenbusState::closing:
    case XenbusState::closed:
      // Linux: F=Closed while online=0 also unregisters the device.
      w.to_closed(/*removal=*/!v.online);
      return;
    case XenbusState::unknown:
      // The frontend's state node vanished (its directory was removed): Linux closes and
      // unregisters the device.
      w.to_closed(/*removal=*/true);
      return;
    case XenbusState::reconfiguring:
      // Linux frontend_changed(): re-read xdp-headroom, answer Reconfigured. Only a connected
      // vif has anything to reconfigure (a connect reads the key anyway); a 7 while we are
      // already Reconfigured (7 -> 1..3 -> 7 coalesced) applies the key again.
      if (!v.online || v.rings != RingsState::up) return;
      if (v.backend != XenbusState::connected && v.backend != XenbusState::reconfigured) return;
      w.emit(ApplyXdpHeadroom{});
      if (v.backend != XenbusState::reconfigured) w.write(XenbusState::reconfigured);
      return;
    case XenbusState::init_wait:
    case XenbusState::initialised:   // Linux netback waits for 4, as netfront skips 3
    case XenbusState::reconfigured:  // a backend's state, meaningless from a frontend
      return;
  }
}

void on(Walker& w, const FrontendStateInvalid&) {
  BackendView& v = w.view();
  // Forget the last valid value so the next valid write counts as a change.
  v.frontend.reset();
  if (v.removed) return;
  if (v.backend != XenbusState::init_wait && v.backend != XenbusState::connected &&
      v.backend != XenbusState::reconfigured)
    return;
  // Linux netback's frontend_changed() default branch: xenbus_dev_fatal("saw state %d at
  // frontend") -> Closing.
  w.fatal(22 /*EINVAL*/, "saw an invalid state at frontend");
}

void on(Walker& w, const HotplugStatusChanged& e) {
  w.view().hotplug = e.status;
  if (e.status == HotplugStatus::connected) w.try_connect();
}

void on(Walker& w, const OnlineChanged& e) {
  BackendView& v = w.view();
  if (v.online == e.online) return;
  v.online = e.online;
  if (e.online || !probed(v) || v.removed) return;
  // libxl's removal writes online=0 and state=5 together; whichever we see first tears down.
  w.to_closed(/*removal=*/true);
}

void on(Walker& w, const ToolstackSetBackendState& e) {
  BackendView& v = w.view();
  // libxl only ever writes 1 (at creation: reported as BackendDirAppeared) and 5 (removal);
  // a toolstack forcing Closed is handled the same way. Anything else is not ours to obey.
  if (!closing_or_closed(e.state)) return;
  if (v.backend == e.state) {
    // Already there (e.g. Closing after a fatal error): only the online=0 half is news.
    if (!e.online) on(w, OnlineChanged{false});
    return;
  }
  const bool was_probed = probed(v);
  v.online = e.online;
  v.backend = e.state;
  if (!was_probed) {
    // Never probed (we missed the InitWait deadline, or the keys were refused): answer with
    // Closed so libxl does not wait its 10 s.
    if (e.state == XenbusState::closing) w.to_closed(/*removal=*/false);
    if (!v.online) v.removed = true;
    return;
  }
  w.to_closed(/*removal=*/!v.online);
}

void on(Walker& w, const FrontendDomainGone&) {
  BackendView& v = w.view();
  if (v.removed) return;
  if (!probed(v)) {
    v.removed = true;
    return;
  }
  w.to_closed(/*removal=*/true);
}

void on(Walker& w, const ConnectSucceeded&) {
  BackendView& v = w.view();
  switch (v.rings) {
    case RingsState::connecting:
      v.rings = RingsState::up;
      w.try_connect();
      return;
    case RingsState::down:
      // A connection nobody is waiting for any more (we disconnected meanwhile): undo it so
      // the vif layer cannot keep rings we believe are gone.
      w.emit(Disconnect{});
      return;
    case RingsState::up: return;
  }
}

void on(Walker& w, const ConnectFailed& e) {
  BackendView& v = w.view();
  if (v.rings != RingsState::connecting) return;
  // VifControl::connect is all-or-nothing: a failure left nothing mapped or bound.
  v.rings = RingsState::down;
  w.fatal(e.error, e.message);
}

void on(Walker& w, const TapCreateFailed& e) {
  BackendView& v = w.view();
  // CreateTap is issued on the way into InitWait, and on the way to Closed when adopting
  // (a frontend starting over later asks for the TAP again).
  if (!v.tap || (v.backend != XenbusState::init_wait && v.backend != XenbusState::closed)) return;
  v.tap = false;
  w.fatal(e.error, e.message);
}

void on(Walker& w, const ProbeFailed& e) {
  BackendView& v = w.view();
  if (v.removed || closing_or_closed(v.backend) || v.backend == XenbusState::connected ||
      v.backend == XenbusState::reconfigured)
    return;
  w.fatal(e.error, e.message);
}

void on(Walker& w, const ReconfigureFailed& e) {
  BackendView& v = w.view();
  // ApplyXdpHeadroom is issued only with the rings up, on the way to 8 or back to 4; a
  // result arriving after a teardown is stale.
  if (v.rings != RingsState::up) return;
  if (v.backend != XenbusState::connected && v.backend != XenbusState::reconfigured) return;
  // A headroom we cannot honour is the frontend's error, as a bad key at connect is.
  w.fatal(e.error, e.message);
}

void on(Walker& w, const DaemonShutdown&) {
  BackendView& v = w.view();
  v.shut_down = true;
  if (!probed(v) || v.removed) return;
  // Close the device so the frontend stops using it, and release everything. hotplug-status
  // stays: the device still exists for the toolstack, only its backend is going away.
  w.to_closing();
  if (v.tap) {
    w.emit(DestroyTap{});
    v.tap = false;
  }
  w.to_closed(/*removal=*/false);
}

void on(Walker& w, const RingsAdopted&) {
  BackendView& v = w.view();
  // Only a fresh vif, as BackendAdopted: the store says 4 on both sides and stays so.
  if (probed(v) || v.removed) return;
  v.online = true;
  v.backend = XenbusState::connected;
  v.frontend = XenbusState::connected;
  v.tap = true;
  v.rings = RingsState::up;
  v.hotplug = HotplugStatus::connected;
  v.stale_frontend = false;
}

void on(Walker& w, const BackendAdopted& e) {
  BackendView& v = w.view();
  // Only a fresh vif adopts, and only a device an earlier backend had moved past 1.
  if (probed(v) || v.removed || e.found == XenbusState::unknown ||
      e.found == XenbusState::initialising)
    return;
  v.online = true;
  v.backend = e.found;
  // The old "connected" was about a TAP that is gone: wait for a fresh run of the script.
  w.emit(RemoveHotplugStatus{});
  v.hotplug = HotplugStatus::other;
  v.stale_frontend = v.frontend != XenbusState::initialising;
  // Closed first: if the TAP cannot be made, the rest of the list is dropped and the store
  // must already say what the machine believes.
  w.to_closed(/*removal=*/false);
  w.create_tap_if_needed();
  w.emit(RunHotplugScript{});
  // A frontend already waiting to start over (it saw an orderly exit's Closed) goes on now.
  if (!v.stale_frontend) w.to_init_wait();
}

}  // namespace

//  The backend's states (B:state), as this machine drives them:
//
//        toolstack writes 1                       F=Closing/Closed, online=0,
//              |                                  toolstack 5, domain gone
//              v                                        |
//   +---------------------+  CreateTap, Advertise  +----v-----+        +--------+
//   | Unknown (store: 1)  |----------------------->| InitWait |------->| Closing|
//   +---------------------+      WriteState(2)     +----------+        +--------+
//              |                                     |  ^    ^             |
//              | ProbeFailed / TapCreateFailed       |  |    |             v
//              +-------------------------------------|--|----|------> +--------+
//                                      F=4: ReadFrontend |    +--------| Closed |
//                                      AndConnect;       |   F=1/F=4   +--------+
//                       rings up + F=4 + hotplug=connected  |  (TAP kept     ^
//                                        v               |   if online)    |
//                                   +-----------+ F=1    |                 |
//                                   | Connected |--------+ (via 5, 6)      |
//                                   +-----------+---- Disconnect, 5 -------+
//
//  Reconfiguring (feature-xdp-headroom), with the rings up throughout:
//
//   +-----------+  F=7: ApplyXdpHeadroom  +--------------+
//   | Connected |------------------------>| Reconfigured |  F=1/5/6/0, fatal: as from
//   |           |<------------------------|     (8)      |  Connected (via 5, 6)
//   +-----------+  F=4: ApplyXdpHeadroom  +--------------+
//
//  Edges written: 1->2, 1->5, 2->4, 2->5, 4->5, 4->8, 8->4, 8->5, 5->6, 6->2. Every other move is a
//  walk along them (Walker). Removal (online=0, F=Unknown, F=Closed with online=0, domain gone)
//  adds DestroyTap and RemoveHotplugStatus before the final 6; a plain frontend close keeps the
//  TAP, so the frontend can come back (1 -> InitWait) without the hotplug script running again.
Transition next(const BackendView& view, const Event& event) {
  if (view.shut_down) return {view, {}};
  Walker w(view);
  std::visit([&](const auto& e) { on(w, e); }, event);
  return std::move(w).finish();
}

std::string describe(const Event& e) {
  return std::visit(
      [](const auto& ev) -> std::string {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, BackendDirAppeared>) return "BackendDirAppeared";
        if constexpr (std::is_same_v<T, FrontendStateChanged>) {
          return "FrontendStateChanged(" + std::string(state_name(ev.state)) + ")";
        }
        if constexpr (std::is_same_v<T, FrontendStateInvalid>) return "FrontendStateInvalid";
        if constexpr (std::is_same_v<T, HotplugStatusChanged>) {
          switch (ev.status) {
            case HotplugStatus::connected: return "HotplugStatusChanged(connected)";
            case HotplugStatus::error: return "HotplugStatusChanged(error)";
            case HotplugStatus::other: return "HotplugStatusChanged(other)";
          }
        }
        if constexpr (std::is_same_v<T, OnlineChanged>) {
          return ev.online ? "OnlineChanged(1)" : "OnlineChanged(0)";
        }
        if constexpr (std::is_same_v<T, ToolstackSetBackendState>) {
          return "ToolstackSetBackendState(" + std::string(state_name(ev.state)) +
                 (ev.online ? ", online)" : ", offline)");
        }
        if constexpr (std::is_same_v<T, FrontendDomainGone>) return "FrontendDomainGone";
        if constexpr (std::is_same_v<T, ConnectSucceeded>) return "ConnectSucceeded";
        if constexpr (std::is_same_v<T, ConnectFailed>) return "ConnectFailed(" + ev.message + ")";
        if constexpr (std::is_same_v<T, TapCreateFailed>) {
          return "TapCreateFailed(" + ev.message + ")";
        }
        if constexpr (std::is_same_v<T, ProbeFailed>) return "ProbeFailed(" + ev.message + ")";
        if constexpr (std::is_same_v<T, DaemonShutdown>) return "DaemonShutdown";
        if constexpr (std::is_same_v<T, BackendAdopted>) {
          return "BackendAdopted(" + std::string(state_name(ev.found)) + ")";
        }
        if constexpr (std::is_same_v<T, ReconfigureFailed>) {
          return "ReconfigureFailed(" + ev.message + ")";
        }
        if constexpr (std::is_same_v<T, RingsAdopted>) return "RingsAdopted";
        return "?";
      },
      e);
}

std::string describe(const Action& a) {
  return std::visit(
      [](const auto& act) -> std::string {
        using T = std::decay_t<decltype(act)>;
        if constexpr (std::is_same_v<T, CreateTap>) return "CreateTap";
        if constexpr (std::is_same_v<T, AdvertiseFeatures>) return "AdvertiseFeatures";
        if constexpr (std::is_same_v<T, WriteState>) {
          return "WriteState(" + std::string(state_name(act.state)) + ")";
        }
        if constexpr (std::is_same_v<T, ReadFrontendAndConnect>) return "ReadFrontendAndConnect";
        if constexpr (std::is_same_v<T, Disconnect>) return "Disconnect";
        if constexpr (std::is_same_v<T, DestroyTap>) return "DestroyTap";
        if constexpr (std::is_same_v<T, RemoveHotplugStatus>) return "RemoveHotplugStatus";
        if constexpr (std::is_same_v<T, RunHotplugScript>) return "RunHotplugScript";
        if constexpr (std::is_same_v<T, ReportFatal>) {
          return "ReportFatal(" + std::to_string(act.error) + " " + act.message + ")";
        }
        if constexpr (std::is_same_v<T, ApplyXdpHeadroom>) return "ApplyXdpHeadroom";
        return "?";
      },
      a);
}

std::string describe(const BackendView& v) {
  std::string s = "B=" + std::string(state_name(v.backend));
  s += " F=" + (v.frontend ? std::string(state_name(*v.frontend)) : std::string("-"));
  s += v.online ? " online" : " offline";
  s += v.tap ? " tap" : " no-tap";
  switch (v.rings) {
    case RingsState::down: s += " rings-down"; break;
    case RingsState::connecting: s += " rings-connecting"; break;
    case RingsState::up: s += " rings-up"; break;
  }
  switch (v.hotplug) {
    case HotplugStatus::other: s += " hotplug-none"; break;
    case HotplugStatus::connected: s += " hotplug-connected"; break;
    case HotplugStatus::error: s += " hotplug-error"; break;
  }
  if (v.removed) s += " removed";
  if (v.shut_down) s += " shut-down";
  if (v.stale_frontend) s += " stale-frontend";
  return s;
}

}  // namespace unetback::xenbus
