// The frontend's (netfront-shim's) xenbus protocol as a pure function:
// `frontend_next(view, event) -> {view', actions}`.
//
// It decides; it does nothing. ShimLoop (shim_xenbus.cpp) turns what it observes (its xenstore
// watch, the connect and close deadlines, signals, the side channels) into Events, calls
// frontend_next(), and carries the Actions out in order, feeding the outcome of the actions
// that can fail back as Events (ConnectSucceeded/ConnectFailed/TapSetupFailed,
// SuspendAcknowledged, DomainOpened/OpenFailed, ReconfigureFailed). Every (view, event) pair
// is defined: an event that means nothing in a view returns no actions and keeps the view.
//
// The protocol facts it encodes (Linux xen-netfront's netback_changed and xennet_xdp_set):
// * The frontend connects when it sees the backend in InitWait and writes its keys with
//   Connected (4) in one transaction, skipping Initialised.
// * Backend Closing/Closed (or its state gone) closes the frontend: Closing (5), the rings
//   released, Closed (6); once the backend is out of Closing the frontend says Initialising
//   (1), which the backend takes as "starting over" and answers with InitWait.
// * A backend seen Connected and then InitWait again without a close was restarted: the rings
//   mean nothing to it, so the frontend closes and starts over.
// * XDP headroom: Reconfiguring (7) with the new key, Connected (4) again once the backend
//   says Reconfigured (8) (or, here, after a deadline: a test tool says so and goes on).
// * Suspend (control/shutdown=suspend): acknowledged, the data path stops, nothing is said to
//   the backend; the domain is let go once the toolstack removed the vif; a resume opens the
//   new domain and connects its vif afresh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/xenbus/xenbus_state.hpp"

namespace unetback::shim {

using xenbus::XenbusState;

/// The frontend's protocol phase.
enum class FrontendPhase : std::uint8_t {
  detached,          ///< no domain held: before the first open, or suspended and let go
  waiting,           ///< disconnected, waiting for the backend's InitWait
  restarting,        ///< after a close (or a stale F:state): F=1 once B is there, not Closing
  connecting,        ///< Connect issued; its outcome outstanding
  awaiting_backend,  ///< F=4 written, rings up, data path running; waiting for B=4
  connected,         ///< both Connected, announced
  reconfiguring,     ///< F=7 and a new xdp-headroom written; waiting for B=8
  closing,           ///< F=5 written; the rings go once B reads 5..8 or is gone (or a deadline)
  suspended,         ///< suspend acknowledged, data path stopped, rings kept, nothing said
  stopped,           ///< the loop exits; everything else is ignored
};
inline constexpr std::uint8_t kFrontendPhaseCount = 10;

struct FrontendView {
  FrontendPhase phase = FrontendPhase::detached;
  /// B:state as last read; nullopt before the first read, or while missing or not a state.
  std::optional<XenbusState> backend;
  /// B=Connected seen once: the connect deadline is over for good.
  bool ever_connected = false;
  /// win-xenvif: the connect deadline runs per backend state (re-armed at each change).
  bool per_state_deadline = false;
  /// Stopping: the exit code once the close has finished (set only in closing or stopped).
  std::optional<int> exit_code;

  friend bool operator==(const FrontendView&, const FrontendView&) = default;
};

// ---- Events ---------------------------------------------------------------------------------

/// B:state as read after a watch event (the vif's `backend` node present); nullopt when the
/// node is missing or holds no valid state.
struct BackendStateChanged {
  std::optional<XenbusState> state;
  friend bool operator==(const BackendStateChanged&, const BackendStateChanged&) = default;
};
/// The vif's F:backend node is gone: the toolstack removed the device.
struct VifRemoved {
  friend bool operator==(const VifRemoved&, const VifRemoved&) = default;
};
/// The store itself is unreachable (a read failed with anything but "no such node").
struct XenstoreLost {
  friend bool operator==(const XenstoreLost&, const XenstoreLost&) = default;
};
/// The domain's xenstore connection and Netfront are open (at start, or after OpenDomain);
/// `frontend` is F:state as found there.
struct DomainOpened {
  std::optional<XenbusState> frontend;
  friend bool operator==(const DomainOpened&, const DomainOpened&) = default;
};
/// OpenDomain failed (the new domain cannot be claimed or has no such vif).
struct OpenFailed {
  friend bool operator==(const OpenFailed&, const OpenFailed&) = default;
};
/// Outcomes of Connect: rings up, TAP ready and data path attached; or nothing left behind
/// (retried at the next backend state); or the rings are up but the guest TAP cannot be made.
struct ConnectSucceeded {
  friend bool operator==(const ConnectSucceeded&, const ConnectSucceeded&) = default;
};
struct ConnectFailed {
  friend bool operator==(const ConnectFailed&, const ConnectFailed&) = default;
};
struct TapSetupFailed {
  friend bool operator==(const TapSetupFailed&, const TapSetupFailed&) = default;
};
/// control/shutdown reads "suspend" (only with --resume-file).
struct SuspendRequested {
  friend bool operator==(const SuspendRequested&, const SuspendRequested&) = default;
};
/// AcknowledgeSuspend wrote "" back.
struct SuspendAcknowledged {
  friend bool operator==(const SuspendAcknowledged&, const SuspendAcknowledged&) = default;
};
/// SIGUSR1 with a resume file naming another domain.
struct ResumeRequested {
  std::uint16_t domid = 0;
  friend bool operator==(const ResumeRequested&, const ResumeRequested&) = default;
};
/// The --xdp-headroom-file asks for a new headroom the backend can be asked for.
struct XdpHeadroomRequested {
  std::uint32_t headroom = 0;
  friend bool operator==(const XdpHeadroomRequested&, const XdpHeadroomRequested&) = default;
};
/// BeginReconfiguration could not write F=7 or the key.
struct ReconfigureFailed {
  friend bool operator==(const ReconfigureFailed&, const ReconfigureFailed&) = default;
};
/// The backend has not said Reconfigured within the reconfiguration's deadline.
struct ReconfigureDeadlineExpired {
  friend bool operator==(const ReconfigureDeadlineExpired&,
                         const ReconfigureDeadlineExpired&) = default;
};
struct ConnectDeadlineExpired {
  friend bool operator==(const ConnectDeadlineExpired&, const ConnectDeadlineExpired&) = default;
};
/// The backend did not follow our Closing in time.
struct CloseDeadlineExpired {
  friend bool operator==(const CloseDeadlineExpired&, const CloseDeadlineExpired&) = default;
};
/// Stop with `code` (SIGTERM/SIGINT: kExitClean), after a clean close.
struct StopRequested {
  int code = 0;
  friend bool operator==(const StopRequested&, const StopRequested&) = default;
};

using FrontendEvent =
    std::variant<BackendStateChanged, VifRemoved, XenstoreLost, DomainOpened, OpenFailed,
                 ConnectSucceeded, ConnectFailed, TapSetupFailed, SuspendRequested,
                 SuspendAcknowledged, ResumeRequested, XdpHeadroomRequested, ReconfigureFailed,
                 ReconfigureDeadlineExpired, ConnectDeadlineExpired, CloseDeadlineExpired,
                 StopRequested>;

// ---- Actions --------------------------------------------------------------------------------

/// Write F:state (Closed over a stale state found at open; Initialising to start over, unless
/// our state node is gone with the device).
struct WriteState {
  XenbusState state;
  friend bool operator==(const WriteState&, const WriteState&) = default;
};
/// Read the backend's features, grant the rings, write the keys and F=4 in one transaction,
/// make (or adjust) the guest TAP and attach the data path. Feeds back ConnectSucceeded,
/// ConnectFailed or TapSetupFailed. Always last.
struct Connect {
  friend bool operator==(const Connect&, const Connect&) = default;
};
/// B=Connected: the multicast list, the XDP file, RSS, then the ready line (or "reconnected")
/// and, after a resume, a gratuitous ARP.
struct AnnounceConnected {
  friend bool operator==(const AnnounceConnected&, const AnnounceConnected&) = default;
};
enum class CloseReason : std::uint8_t { backend_closed, backend_restarted, vif_removed, stopping };
/// Stop the data path and write F=5 (the rings stay until FinishClose).
struct BeginClose {
  CloseReason reason;
  friend bool operator==(const BeginClose&, const BeginClose&) = default;
};
/// Unbind the ports, revoke the grants, write F=6; `backend_followed` false: the close
/// deadline ran out first.
struct FinishClose {
  bool backend_followed = true;
  friend bool operator==(const FinishClose&, const FinishClose&) = default;
};
struct ArmCloseDeadline {
  friend bool operator==(const ArmCloseDeadline&, const ArmCloseDeadline&) = default;
};
struct CancelCloseDeadline {
  friend bool operator==(const CancelCloseDeadline&, const CancelCloseDeadline&) = default;
};
/// (Re)start the connect deadline: the whole connect, or with per_state_deadline the time
/// the backend may stay in the state it is in now.
struct ArmConnectDeadline {
  friend bool operator==(const ArmConnectDeadline&, const ArmConnectDeadline&) = default;
};
struct CancelConnectDeadline {
  friend bool operator==(const CancelConnectDeadline&, const CancelConnectDeadline&) = default;
};
/// Log that the backend never reached Connected in time.
struct ReportConnectTimeout {
  friend bool operator==(const ReportConnectTimeout&, const ReportConnectTimeout&) = default;
};
/// Write "" to control/shutdown; feeds back SuspendAcknowledged (nothing on failure).
struct AcknowledgeSuspend {
  friend bool operator==(const AcknowledgeSuspend&, const AcknowledgeSuspend&) = default;
};
/// The data path's handlers and descriptors go; the rings stay.
struct StopDataPath {
  friend bool operator==(const StopDataPath&, const StopDataPath&) = default;
};
/// Drop the rings without a word, the xenstore connection and the hypervisor handle.
struct ReleaseDomain {
  friend bool operator==(const ReleaseDomain&, const ReleaseDomain&) = default;
};
/// Claim domain `domid` and open its xenstore connection, Netfront and watches; feeds back
/// DomainOpened or OpenFailed.
struct OpenDomain {
  std::uint16_t domid = 0;
  friend bool operator==(const OpenDomain&, const OpenDomain&) = default;
};
/// F=7, then F:xdp-headroom; feeds back ReconfigureFailed on an error.
struct BeginReconfiguration {
  std::uint32_t headroom = 0;
  friend bool operator==(const BeginReconfiguration&, const BeginReconfiguration&) = default;
};
/// F=4 again; `answered` false: the reconfiguration's deadline ran out.
struct EndReconfiguration {
  bool answered = true;
  friend bool operator==(const EndReconfiguration&, const EndReconfiguration&) = default;
};
/// Stopping with `code`: no more signals are taken.
struct BeginStop {
  int code = 0;
  friend bool operator==(const BeginStop&, const BeginStop&) = default;
};
/// The loop ends, the process exits with `code`.
struct Exit {
  int code = 0;
  friend bool operator==(const Exit&, const Exit&) = default;
};

using FrontendAction =
    std::variant<WriteState, Connect, AnnounceConnected, BeginClose, FinishClose, ArmCloseDeadline,
                 CancelCloseDeadline, ArmConnectDeadline, CancelConnectDeadline,
                 ReportConnectTimeout, AcknowledgeSuspend, StopDataPath, ReleaseDomain, OpenDomain,
                 BeginReconfiguration, EndReconfiguration, BeginStop, Exit>;
using FrontendActions = std::vector<FrontendAction>;

struct FrontendTransition {
  FrontendView view;
  FrontendActions actions;
};

/// The machine. Pure: same input, same output; no I/O.
[[nodiscard]] FrontendTransition frontend_next(const FrontendView& view,
                                               const FrontendEvent& event);

/// The rings are up (mapped by the backend or not): a close must go through Closing.
[[nodiscard]] bool rings_up(FrontendPhase p);

/// For logs and test names.
[[nodiscard]] std::string describe(FrontendPhase p);
[[nodiscard]] std::string describe(const FrontendEvent& e);
[[nodiscard]] std::string describe(const FrontendAction& a);
[[nodiscard]] std::string describe(const FrontendView& v);

}  // namespace unetback::shim
