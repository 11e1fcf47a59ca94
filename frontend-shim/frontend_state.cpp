#include "frontend-shim/frontend_state.hpp"

#include <type_traits>

#include "frontend-shim/shim_options.hpp"

namespace unetback::shim {
namespace {

using P = FrontendPhase;

/// What Netfront::backend_closing() tests: the backend reads Closing or later (5..8), or its
/// state is gone. Nothing is left to wait for before the rings go.
bool backend_closing(std::optional<XenbusState> s) {
  return !s || *s >= XenbusState::closing;
}

bool live(P p) {
  return p != P::detached && p != P::suspended && p != P::stopped;
}

class Machine {
 public:
  explicit Machine(const FrontendView& v) : v_(v) {}

  FrontendView& view() { return v_; }
  FrontendTransition finish() && { return {v_, std::move(actions_)}; }
  // Constructed in place: moving a whole variant trips GCC 12's -Wmaybe-uninitialized.
  template <typename A>
  void emit(A a) {
    actions_.emplace_back(std::in_place_type<A>, std::move(a));
  }

  // F=5 with the data path stopped; the rings go at once if the backend is already closing
  // (or gone), else once it follows or the close deadline runs out.
  void close(CloseReason reason) {
    emit(BeginClose{reason});
    if (backend_closing(v_.backend)) {
      finish_close(true);
      return;
    }
    emit(ArmCloseDeadline{});
    v_.phase = P::closing;
  }

  // F=6. Stopping: the loop ends here. Otherwise say Initialising once the backend is out of
  // Closing (restarting), as after every close.
  void finish_close(bool followed) {
    emit(FinishClose{followed});
    if (v_.exit_code) {
      emit(Exit{*v_.exit_code});
      v_.phase = P::stopped;
      return;
    }
    v_.phase = P::restarting;
  }

  // Disconnected (waiting or restarting) and the backend's state as just read.
  void disconnected() {
    const auto s = v_.backend;
    // Never while the backend is still Closing, where a coalesced 6->1 could look like no
    // acknowledgement at all; our backend and Linux's take 1 after 6 as "starting over".
    if (v_.phase == P::restarting && s && *s != XenbusState::closing) {
      emit(WriteState{XenbusState::initialising});
      v_.phase = P::waiting;
    }
    if (v_.phase == P::waiting && s == XenbusState::init_wait) {
      emit(Connect{});
      v_.phase = P::connecting;
    }
  }

  void stop(int code) {
    if (v_.phase == P::stopped || v_.exit_code) return;
    emit(BeginStop{code});
    emit(CancelConnectDeadline{});
    v_.exit_code = code;
    if (rings_up(v_.phase)) {
      close(CloseReason::stopping);
      return;
    }
    if (v_.phase == P::closing) return;  // the close under way ends the loop
    emit(Exit{code});
    v_.phase = P::stopped;
  }

 private:
  FrontendView v_;
  FrontendActions actions_;
};

void on(Machine& m, const BackendStateChanged& e) {
  FrontendView& v = m.view();
  if (!live(v.phase)) return;
  const auto before = v.backend;
  v.backend = e.state;
  if (v.per_state_deadline && !v.ever_connected && !v.exit_code && e.state != before) {
    // win-xenvif: each backend state is waited for on its own, not the connect.
    m.emit(ArmConnectDeadline{});
  }
  const auto s = e.state;
  switch (v.phase) {
    case P::closing:
      if (backend_closing(s)) {
        m.finish_close(true);
        if (v.phase == P::restarting) m.disconnected();
      }
      return;
    case P::waiting:
    case P::restarting: m.disconnected(); return;
    case P::awaiting_backend:
    case P::connected:
    case P::reconfiguring:
      if (!s || *s == XenbusState::closing || *s == XenbusState::closed) {
        // netfront: the backend Closing/Closed (or gone) closes the frontend.
        m.close(CloseReason::backend_closed);
        if (v.phase == P::restarting) m.disconnected();
        return;
      }
      if (s == XenbusState::init_wait && v.phase != P::awaiting_backend) {
        // Connected (we saw 4), and now InitWait without a close in between: a restarted
        // backend that probed the device afresh (Linux netback reloaded does this). Our rings
        // mean nothing to it: start over once it has followed our Closing, or given up on.
        m.close(CloseReason::backend_restarted);
        if (v.phase == P::restarting) m.disconnected();
        return;
      }
      if (v.phase == P::reconfiguring && s == XenbusState::reconfigured) {
        // The backend has taken the new headroom: back to Connected (xennet_xdp_set).
        m.emit(EndReconfiguration{true});
        v.phase = P::connected;
        return;
      }
      if (v.phase == P::awaiting_backend && s == XenbusState::connected) {
        if (!v.ever_connected) {
          v.ever_connected = true;
          m.emit(CancelConnectDeadline{});
        }
        m.emit(AnnounceConnected{});
        v.phase = P::connected;
      }
      return;
    case P::detached:
    case P::connecting:
    case P::suspended:
    case P::stopped: return;
  }
}

void on(Machine& m, const VifRemoved&) {
  FrontendView& v = m.view();
  switch (v.phase) {
    case P::awaiting_backend:
    case P::connected:
    case P::reconfiguring:
      // Nothing to talk to until the toolstack adds the device again: the backend went with it.
      v.backend.reset();
      m.close(CloseReason::vif_removed);
      return;
    case P::closing:
      v.backend.reset();
      m.finish_close(true);
      return;
    case P::suspended:
      // The toolstack tears the device down before it destroys the domain, as libxl's save
      // does: until then the rings stay as they were.
      m.emit(ReleaseDomain{});
      v.phase = P::detached;
      return;
    case P::detached:
    case P::waiting:
    case P::restarting:
    case P::connecting:
    case P::stopped: return;
  }
}

void on(Machine& m, const XenstoreLost&) {
  FrontendView& v = m.view();
  if (!live(v.phase) || v.phase == P::connecting) return;
  if (v.phase == P::closing) {
    // Nothing can be read any more: the backend cannot be waited for.
    v.backend.reset();
    m.finish_close(true);
    if (v.phase == P::stopped) return;
  }
  v.backend.reset();
  m.stop(kExitXenstoreLost);
}

void on(Machine& m, const DomainOpened& e) {
  FrontendView& v = m.view();
  if (v.phase != P::detached) return;
  v.backend.reset();
  if (!v.ever_connected) m.emit(ArmConnectDeadline{});
  // A previous shim for this domain may have left the frontend Connected (it crashed) or
  // Closed (it stopped cleanly). Like Linux's xenbus_reset_state at boot, close what is
  // stale and start over from Initialising once the backend is Closed.
  if (!e.frontend || *e.frontend == XenbusState::initialising) {
    v.phase = P::waiting;
    return;
  }
  if (*e.frontend != XenbusState::closed) m.emit(WriteState{XenbusState::closed});
  v.phase = P::restarting;
}

void on(Machine& m, const OpenFailed&) {
  if (m.view().phase != P::detached) return;
  m.stop(kExitSetupFailure);
}

void on(Machine& m, const ConnectSucceeded&) {
  FrontendView& v = m.view();
  if (v.phase != P::connecting) return;
  v.phase = P::awaiting_backend;
}

void on(Machine& m, const ConnectFailed&) {
  FrontendView& v = m.view();
  if (v.phase != P::connecting) return;
  // Nothing was left behind: retried when the backend's state is read again.
  v.phase = P::waiting;
}

void on(Machine& m, const TapSetupFailed&) {
  FrontendView& v = m.view();
  if (v.phase != P::connecting) return;
  // The rings are up: a clean close before the exit.
  v.phase = P::awaiting_backend;
  m.stop(kExitSetupFailure);
}

bool may_suspend(const FrontendView& v) {
  if (v.exit_code) return false;
  switch (v.phase) {
    case P::waiting:
    case P::restarting:
    case P::awaiting_backend:
    case P::connected:
    case P::reconfiguring:
    case P::closing: return true;
    case P::detached:
    case P::connecting:
    case P::suspended:
    case P::stopped: return false;
  }
  return false;
}

void on(Machine& m, const SuspendRequested&) {
  // xen/manage.c: the request is acknowledged by writing "" back; then the domain suspends.
  if (may_suspend(m.view())) m.emit(AcknowledgeSuspend{});
}

void on(Machine& m, const SuspendAcknowledged&) {
  FrontendView& v = m.view();
  if (!may_suspend(v)) return;
  // A suspended domain does not run: the data path stops and the backend is told nothing.
  m.emit(StopDataPath{});
  m.emit(CancelCloseDeadline{});
  m.emit(CancelConnectDeadline{});
  v.phase = P::suspended;
}

void on(Machine& m, const ResumeRequested& e) {
  FrontendView& v = m.view();
  if (v.phase == P::suspended) {
    // Resumed elsewhere before the toolstack removed our old device: let the old domain go.
    m.emit(ReleaseDomain{});
    v.phase = P::detached;
  }
  if (v.phase != P::detached) return;
  m.emit(OpenDomain{e.domid});
}

void on(Machine& m, const XdpHeadroomRequested& e) {
  FrontendView& v = m.view();
  if (v.phase != P::connected) return;
  m.emit(BeginReconfiguration{e.headroom});
  v.phase = P::reconfiguring;
}

void on(Machine& m, const ReconfigureFailed&) {
  FrontendView& v = m.view();
  if (v.phase != P::reconfiguring) return;
  v.phase = P::connected;
}

void on(Machine& m, const ReconfigureDeadlineExpired&) {
  FrontendView& v = m.view();
  if (v.phase != P::reconfiguring) return;
  // Linux netfront waits forever; a test tool would rather say so and go back to Connected.
  m.emit(EndReconfiguration{false});
  v.phase = P::connected;
}

void on(Machine& m, const ConnectDeadlineExpired&) {
  FrontendView& v = m.view();
  if (v.ever_connected || v.exit_code || !live(v.phase)) return;
  m.emit(ReportConnectTimeout{});
  m.stop(kExitSetupFailure);
}

void on(Machine& m, const CloseDeadlineExpired&) {
  FrontendView& v = m.view();
  if (v.phase != P::closing) return;
  m.finish_close(false);
}

void on(Machine& m, const StopRequested& e) {
  m.stop(e.code);
}

}  // namespace

bool rings_up(FrontendPhase p) {
  return p == P::awaiting_backend || p == P::connected || p == P::reconfiguring ||
         p == P::suspended;
}

// clang-format off
//  The frontend's phases, as this machine drives them (F=n: what we write):
//
//   detached --DomainOpened--> waiting --B=2: Connect--> connecting --ok--> awaiting_backend
//      |  (stale F: F=6,          ^                          | failed            | B=4: Announce
//      |    restarting)           | B there, not 5: F=1      v                   v
//      |                      restarting              waiting           connected <-> reconfiguring
//      |                          ^   ^                                   |  F=7, key / B=8: F=4
//      |          B>=5/gone: F=6  |   | B=5/6/gone: F=5, F=6 at once        |
//      |                       closing <------- B=2 (a restarted backend): F=5
//      |
//   suspended <-- control/shutdown=suspend, acknowledged, from any live phase
//      | vif removed: the domain let go (detached); SIGUSR1: OpenDomain
//
//  Stop (signal, connect deadline, lost store, failed setup): through Closing when the rings
//  are up, else at once; the loop exits when the close is over (F=6, Exit).
// clang-format on
FrontendTransition frontend_next(const FrontendView& view, const FrontendEvent& event) {
  if (view.phase == P::stopped) return {view, {}};
  Machine m(view);
  std::visit([&](const auto& e) { on(m, e); }, event);
  return std::move(m).finish();
}

std::string describe(FrontendPhase p) {
  switch (p) {
    case P::detached: return "detached";
    case P::waiting: return "waiting";
    case P::restarting: return "restarting";
    case P::connecting: return "connecting";
    case P::awaiting_backend: return "awaiting-backend";
    case P::connected: return "connected";
    case P::reconfiguring: return "reconfiguring";
    case P::closing: return "closing";
    case P::suspended: return "suspended";
    case P::stopped: return "stopped";
  }
  return "?";
}

namespace {
std::string state_text(std::optional<XenbusState> s) {
  return s ? std::string(xenbus::state_name(*s)) : std::string("gone");
}
}  // namespace

std::string describe(const FrontendEvent& e) {
  return std::visit(
      [](const auto& ev) -> std::string {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, BackendStateChanged>) {
          return "BackendStateChanged(" + state_text(ev.state) + ")";
        }
        if constexpr (std::is_same_v<T, VifRemoved>) return "VifRemoved";
        if constexpr (std::is_same_v<T, XenstoreLost>) return "XenstoreLost";
        if constexpr (std::is_same_v<T, DomainOpened>) {
          return "DomainOpened(" + state_text(ev.frontend) + ")";
        }
        if constexpr (std::is_same_v<T, OpenFailed>) return "OpenFailed";
        if constexpr (std::is_same_v<T, ConnectSucceeded>) return "ConnectSucceeded";
        if constexpr (std::is_same_v<T, ConnectFailed>) return "ConnectFailed";
        if constexpr (std::is_same_v<T, TapSetupFailed>) return "TapSetupFailed";
        if constexpr (std::is_same_v<T, SuspendRequested>) return "SuspendRequested";
        if constexpr (std::is_same_v<T, SuspendAcknowledged>) return "SuspendAcknowledged";
        if constexpr (std::is_same_v<T, ResumeRequested>) {
          return "ResumeRequested(" + std::to_string(ev.domid) + ")";
        }
        if constexpr (std::is_same_v<T, XdpHeadroomRequested>) {
          return "XdpHeadroomRequested(" + std::to_string(ev.headroom) + ")";
        }
        if constexpr (std::is_same_v<T, ReconfigureFailed>) return "ReconfigureFailed";
        if constexpr (std::is_same_v<T, ReconfigureDeadlineExpired>) {
          return "ReconfigureDeadlineExpired";
        }
        if constexpr (std::is_same_v<T, ConnectDeadlineExpired>) return "ConnectDeadlineExpired";
        if constexpr (std::is_same_v<T, CloseDeadlineExpired>) return "CloseDeadlineExpired";
        if constexpr (std::is_same_v<T, StopRequested>) {
          return "StopRequested(" + std::to_string(ev.code) + ")";
        }
        return "?";
      },
      e);
}

std::string describe(const FrontendAction& a) {
  return std::visit(
      [](const auto& act) -> std::string {
        using T = std::decay_t<decltype(act)>;
        if constexpr (std::is_same_v<T, WriteState>) {
          return "WriteState(" + std::string(xenbus::state_name(act.state)) + ")";
        }
        if constexpr (std::is_same_v<T, Connect>) return "Connect";
        if constexpr (std::is_same_v<T, AnnounceConnected>) return "AnnounceConnected";
        if constexpr (std::is_same_v<T, BeginClose>) {
          switch (act.reason) {
            case CloseReason::backend_closed: return "BeginClose(backend-closed)";
            case CloseReason::backend_restarted: return "BeginClose(backend-restarted)";
            case CloseReason::vif_removed: return "BeginClose(vif-removed)";
            case CloseReason::stopping: return "BeginClose(stopping)";
          }
        }
        if constexpr (std::is_same_v<T, FinishClose>) {
          return act.backend_followed ? "FinishClose" : "FinishClose(deadline)";
        }
        if constexpr (std::is_same_v<T, ArmCloseDeadline>) return "ArmCloseDeadline";
        if constexpr (std::is_same_v<T, CancelCloseDeadline>) return "CancelCloseDeadline";
        if constexpr (std::is_same_v<T, ArmConnectDeadline>) return "ArmConnectDeadline";
        if constexpr (std::is_same_v<T, CancelConnectDeadline>) return "CancelConnectDeadline";
        if constexpr (std::is_same_v<T, ReportConnectTimeout>) return "ReportConnectTimeout";
        if constexpr (std::is_same_v<T, AcknowledgeSuspend>) return "AcknowledgeSuspend";
        if constexpr (std::is_same_v<T, StopDataPath>) return "StopDataPath";
        if constexpr (std::is_same_v<T, ReleaseDomain>) return "ReleaseDomain";
        if constexpr (std::is_same_v<T, OpenDomain>) {
          return "OpenDomain(" + std::to_string(act.domid) + ")";
        }
        if constexpr (std::is_same_v<T, BeginReconfiguration>) {
          return "BeginReconfiguration(" + std::to_string(act.headroom) + ")";
        }
        if constexpr (std::is_same_v<T, EndReconfiguration>) {
          return act.answered ? "EndReconfiguration" : "EndReconfiguration(deadline)";
        }
        if constexpr (std::is_same_v<T, BeginStop>) {
          return "BeginStop(" + std::to_string(act.code) + ")";
        }
        if constexpr (std::is_same_v<T, Exit>) return "Exit(" + std::to_string(act.code) + ")";
        return "?";
      },
      a);
}

std::string describe(const FrontendView& v) {
  std::string s = describe(v.phase) + " B=" + state_text(v.backend);
  if (v.ever_connected) s += " ever-connected";
  if (v.per_state_deadline) s += " per-state-deadline";
  if (v.exit_code) s += " exit=" + std::to_string(*v.exit_code);
  return s;
}

}  // namespace unetback::shim
