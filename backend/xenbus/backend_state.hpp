// The backend's xenbus state machine as a pure function: `next(view, event) -> {view', actions}`.
//
// It decides; it does nothing. BackendXenbus (xenbus_adapter.hpp) turns xenstore watch events
// into Events, calls next(), and carries the Actions out in order against XenStore and the vif
// layer, feeding the outcome of the actions that can fail back as Events (ConnectSucceeded,
// ConnectFailed, TapCreateFailed, ProbeFailed). Every (view, event) pair is defined: an event
// that means nothing in a view returns no actions, never an invalid transition.
//
// The protocol facts it encodes (Linux netback's xenbus.c, Linux netfront's talk_to_netback,
// libxl's vif contract; docs/design.md, "The xenbus state machine"):
// * libxl writes B:state=1, online=1 and waits 10 s for InitWait; its hotplug script needs the
//   TAP `vif<domid>.<devid>` to exist by then, so the TAP is created *before* state 2.
// * Linux netfront connects when it sees InitWait and goes straight to Connected (4), skipping
//   Initialised; the backend maps the rings on F=4 but writes B=4 only once hotplug-status reads
//   "connected" as well (in either order of arrival).
// * Removal: libxl writes online=0 and state=5 in one transaction and waits 10 s for state 6.
// * XDP headroom (we advertise feature-xdp-headroom): Linux netfront changes F:xdp-headroom
//   while connected by going Reconfiguring (7), waiting for B=Reconfigured (8), then going
//   back to Connected (4); Linux netback re-reads the key on 7 and answers 8, and follows the
//   frontend back to 4. The rings stay up throughout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/xenbus/xenbus_state.hpp"

namespace unetback::xenbus {

/// Whether the data rings are mapped and the event channels bound.
enum class RingsState : std::uint8_t {
  down,
  connecting,  // ReadFrontendAndConnect issued; ConnectSucceeded/ConnectFailed outstanding
  up,
};

/// What B:hotplug-status says: the hotplug script writes "connected" or "error"; libxl
/// pre-writes "" to make the backend wait for the script.
enum class HotplugStatus : std::uint8_t { other, connected, error };

/// The backend's view of one vif.
struct BackendView {
  /// B:state as we last wrote it (or as the toolstack overwrote it). `unknown` = not probed yet:
  /// the store then holds the toolstack's 1 (Initialising).
  XenbusState backend = XenbusState::unknown;
  /// The last valid F:state read; nullopt before the first read or after an invalid value.
  std::optional<XenbusState> frontend;
  bool online = false;
  bool tap = false;  // the TAP exists (or its creation was requested and has not failed)
  RingsState rings = RingsState::down;
  HotplugStatus hotplug = HotplugStatus::other;
  /// Torn down for good (online=0, frontend Unknown, frontend domain gone); only a fresh
  /// BackendDirAppeared brings the vif back.
  bool removed = false;
  bool shut_down = false;  // DaemonShutdown seen: everything after it is ignored
  /// Adopted from an earlier daemon: F:state may still say Connected about rings the old
  /// backend had; only a frontend that has left Connected since is believed.
  bool stale_frontend = false;

  friend bool operator==(const BackendView&, const BackendView&) = default;
};

// ---- Events ---------------------------------------------------------------------------------

/// The toolstack created the backend dir: B:state=1 and B:online=1, and the adapter validated
/// the toolstack's keys (frontend path, vifname, ...).
struct BackendDirAppeared {
  friend bool operator==(const BackendDirAppeared&, const BackendDirAppeared&) = default;
};
/// F:state changed to a valid value.
struct FrontendStateChanged {
  XenbusState state;
  friend bool operator==(const FrontendStateChanged&, const FrontendStateChanged&) = default;
};
/// F:state holds something that is not a decimal 0..8: a hostile or broken frontend.
struct FrontendStateInvalid {
  friend bool operator==(const FrontendStateInvalid&, const FrontendStateInvalid&) = default;
};
struct HotplugStatusChanged {
  HotplugStatus status;
  friend bool operator==(const HotplugStatusChanged&, const HotplugStatusChanged&) = default;
};
struct OnlineChanged {
  bool online;
  friend bool operator==(const OnlineChanged&, const OnlineChanged&) = default;
};
/// B:state was written by someone else (libxl writes 5 on removal). Our own writes are not
/// reported: the adapter filters the echo of its writes. libxl writes online=0 in the same
/// transaction as state=5, so the adapter reports B:online as read together with the state:
/// the teardown then releases everything (TAP included) before it writes 6, whichever of the
/// two watches fires first.
struct ToolstackSetBackendState {
  XenbusState state;
  bool online = true;
  friend bool operator==(const ToolstackSetBackendState&,
                         const ToolstackSetBackendState&) = default;
};
/// The frontend's domain died (@releaseDomain and the domain is gone).
struct FrontendDomainGone {
  friend bool operator==(const FrontendDomainGone&, const FrontendDomainGone&) = default;
};
/// Outcome of ReadFrontendAndConnect.
struct ConnectSucceeded {
  friend bool operator==(const ConnectSucceeded&, const ConnectSucceeded&) = default;
};
struct ConnectFailed {
  int error = 0;  // positive errno, as written to the error node
  std::string message;
  friend bool operator==(const ConnectFailed&, const ConnectFailed&) = default;
};
/// CreateTap failed; the rest of that action list was not carried out.
struct TapCreateFailed {
  int error = 0;
  std::string message;
  friend bool operator==(const TapCreateFailed&, const TapCreateFailed&) = default;
};
/// The probe could not proceed: the toolstack's keys are invalid (e.g. `frontend` points at
/// another domain) or the features could not be written. The rest of the list was dropped.
struct ProbeFailed {
  int error = 0;
  std::string message;
  friend bool operator==(const ProbeFailed&, const ProbeFailed&) = default;
};
/// The daemon is stopping: release everything and close the device.
struct DaemonShutdown {
  friend bool operator==(const DaemonShutdown&, const DaemonShutdown&) = default;
};
/// The daemon started and found this device already past state 1, still online: an earlier
/// daemon served it and is gone, and with it the TAP, the mapped rings and the bound ports (a
/// crash leaves B:state at 2 or 4, an orderly exit at 6). The frontend may still believe in
/// its old connection, so it is told that connection is dead (Closing, then Closed); the TAP
/// is created again and the hotplug script re-run for it (libxl ran it once, at create, for
/// the TAP that is gone). A frontend that starts over (1) then connects as after any close.
/// Linux netback, reloaded, writes InitWait over whatever it finds, which Linux netfront
/// ignores unless it is itself Initialising; the walk through Closed at least makes it close.
struct BackendAdopted {
  XenbusState found;
  friend bool operator==(const BackendAdopted&, const BackendAdopted&) = default;
};

/// The daemon started and found this device Connected on both sides, and the vif layer took
/// over the earlier daemon's rings, ports and TAP from its record (issue 20): the device is
/// Connected again without a single write, and the frontend never learns of the restart.
struct RingsAdopted {
  friend bool operator==(const RingsAdopted&, const RingsAdopted&) = default;
};

/// ApplyXdpHeadroom refused the frontend's new xdp-headroom (the rest of that list, the
/// WriteState(Reconfigured) or WriteState(Connected), was not carried out).
struct ReconfigureFailed {
  int error = 0;
  std::string message;
  friend bool operator==(const ReconfigureFailed&, const ReconfigureFailed&) = default;
};

using Event =
    std::variant<BackendDirAppeared, FrontendStateChanged, FrontendStateInvalid,
                 HotplugStatusChanged, OnlineChanged, ToolstackSetBackendState, FrontendDomainGone,
                 ConnectSucceeded, ConnectFailed, TapCreateFailed, ProbeFailed, DaemonShutdown,
                 BackendAdopted, ReconfigureFailed, RingsAdopted>;

// ---- Actions --------------------------------------------------------------------------------

/// Create the TAP `vif<domid>.<devid>` (or B:vifname). Failure -> TapCreateFailed.
struct CreateTap {
  friend bool operator==(const CreateTap&, const CreateTap&) = default;
};
/// Write the feature-* keys (features.hpp) in one transaction. Failure -> ProbeFailed.
struct AdvertiseFeatures {
  friend bool operator==(const AdvertiseFeatures&, const AdvertiseFeatures&) = default;
};
/// Write B:state.
struct WriteState {
  XenbusState state;
  friend bool operator==(const WriteState&, const WriteState&) = default;
};
/// Read and validate the frontend's keys, map the rings, bind the event channels, then feed
/// back ConnectSucceeded or ConnectFailed. Always the last action of a list.
struct ReadFrontendAndConnect {
  friend bool operator==(const ReadFrontendAndConnect&, const ReadFrontendAndConnect&) = default;
};
/// Stop the queues, unbind the event channels, unmap the rings.
struct Disconnect {
  friend bool operator==(const Disconnect&, const Disconnect&) = default;
};
struct DestroyTap {
  friend bool operator==(const DestroyTap&, const DestroyTap&) = default;
};
/// `xenbus_rm B:hotplug-status`, as Linux netback_remove does, so that a backend probed again
/// in this directory waits for a fresh run of the hotplug script.
struct RemoveHotplugStatus {
  friend bool operator==(const RemoveHotplugStatus&, const RemoveHotplugStatus&) = default;
};
/// Run B:script `online` as libxl does after InitWait (only for an adopted device: libxl runs
/// it itself for a new one). The script writes B:hotplug-status.
struct RunHotplugScript {
  friend bool operator==(const RunHotplugScript&, const RunHotplugScript&) = default;
};
/// Like xenbus_dev_fatal's error half: write "<errno> <message>" to
/// `/local/domain/<self>/error/backend/vif/<domid>/<devid>/error`. The state change to Closing
/// that xenbus_dev_fatal also makes is a separate WriteState that follows.
struct ReportFatal {
  int error = 0;
  std::string message;
  friend bool operator==(const ReportFatal&, const ReportFatal&) = default;
};

/// Read F:xdp-headroom again and hand it to every queue (read_xenbus_frontend_xdp), the
/// queues taking it between two passes. Failure (a bad value) -> ReconfigureFailed.
struct ApplyXdpHeadroom {
  friend bool operator==(const ApplyXdpHeadroom&, const ApplyXdpHeadroom&) = default;
};

using Action =
    std::variant<CreateTap, AdvertiseFeatures, WriteState, ReadFrontendAndConnect, Disconnect,
                 DestroyTap, RemoveHotplugStatus, RunHotplugScript, ReportFatal, ApplyXdpHeadroom>;
using Actions = std::vector<Action>;

struct Transition {
  BackendView view;
  Actions actions;
};

/// The machine. Pure: same input, same output; no I/O.
[[nodiscard]] Transition next(const BackendView& view, const Event& event);

/// For logs and test names.
[[nodiscard]] std::string describe(const Event& e);
[[nodiscard]] std::string describe(const Action& a);
[[nodiscard]] std::string describe(const BackendView& v);

}  // namespace unetback::xenbus
