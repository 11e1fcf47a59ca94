// BackendXenbus: one vif's backend directory, driven by the pure machine (backend_state.hpp).
//
// It owns the watches on `/local/domain/<self>/backend/vif/<domid>/<devid>` (its own `state`,
// `online`, `hotplug-status`) and, once the toolstack's `frontend` key has been validated, on
// the frontend's `state` (whose Reconfiguring re-reads F:`xdp-headroom`); while connected also on
// B:`rate`, B:`unetback-allow-mac-spoofing` and F:`request-multicast-control` (we advertise
// feature-dynamic-multicast-control). Watch events become machine Events; the machine's Actions are
// carried out here against XenStore, and against the vif layer through VifControl, so this file
// knows nothing of rings or TAPs.
//
// Threading: single-threaded. The owner (the daemon's BackendManager) reads XenStore's watch
// queue and hands every event whose token this object owns() to handle_watch().
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "backend/xenbus/backend_config.hpp"
#include "backend/xenbus/backend_state.hpp"
#include "backend/xenbus/features.hpp"
#include "backend/xenbus/frontend_config.hpp"
#include "common/hv/xenstore.hpp"
#include "common/util/log.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::xenbus {

/// What the vif layer does for the xenbus side. Calls come from BackendXenbus, in the order the
/// machine decided: create_tap before InitWait, connect only with a TAP, disconnect before
/// destroy_tap.
class VifControl {
 public:
  virtual ~VifControl() = default;
  /// Creates the TAP named `be.tap_name` (libxl's hotplug script needs it before InitWait).
  virtual std::error_code create_tap(const BackendConfig& be) = 0;
  virtual void destroy_tap() = 0;
  /// Takes the device over from an earlier daemon's record without touching xenstore: the TAP
  /// attached again, the rings mapped and settled, the ports bound again and notified, the
  /// queues started. All-or-nothing; an error means the device must reconnect.
  virtual std::error_code adopt(const FrontendConfig& /*fe*/, const BackendConfig& /*be*/,
                                const Rate& /*rate*/) {
    return std::make_error_code(std::errc::operation_not_supported);
  }
  /// The keys the coming connect() was read from, kept in the vif's state record with it.
  virtual void remember_keys(const KeySnapshot& /*keys*/) {}
  /// Keys read again after the connect whose values are now in force (a watched rate, XDP
  /// headroom, request-multicast-control or MAC-spoofing key): they replace the remembered ones.
  virtual void keys_applied(const KeySnapshot& /*keys*/) {}
  /// The keys an earlier daemon that handed the device over (a planned takeover, not a crash)
  /// connected it with: adopt() is then read from them instead of xenstore. nullopt: none.
  [[nodiscard]] virtual std::optional<KeySnapshot> handed_over_keys() { return std::nullopt; }
  /// The device was found served by an earlier daemon and could not be adopted: it goes
  /// through Closing and Closed to a reconnect (for unetback-ctl's "adopted" column).
  virtual void adoption_refused() {}
  /// Maps the rings (refusing `req_prod - rsp_prod > size`), binds the event channels and
  /// starts the queues. All-or-nothing: on error nothing stays mapped or bound.
  virtual std::error_code connect(const FrontendConfig& fe, const BackendConfig& be,
                                  const Rate& rate) = 0;
  /// Stops the queues, unbinds, unmaps. A no-op when not connected.
  virtual void disconnect() = 0;
  /// B:rate changed while connected (a malformed value arrives here as unlimited, as Linux).
  virtual void rate_changed(const Rate& rate) = 0;
  /// F:request-multicast-control changed while connected.
  virtual void multicast_control_changed(bool enabled) = 0;
  /// B:unetback-allow-mac-spoofing changed while connected (a bad value never arrives here).
  virtual void mac_spoofing_changed(bool allowed) = 0;
  /// F:xdp-headroom re-read in Reconfiguring, while connected (validated: 0..4095). Returns
  /// once every queue lays guest RX out with it, so the Reconfigured that follows is true.
  virtual void xdp_headroom_changed(std::uint32_t headroom) = 0;
};

/// Runs B:script `online` for this vif, the way libxl does (the daemon's HotplugLauncher).
/// Only an adopted device needs it: libxl runs the script itself for a device it creates.
using HotplugRunner = std::function<void()>;

class BackendXenbus {
 public:
  /// Nothing happens until start(). `vif` and `xs` must outlive this object.
  BackendXenbus(hv::XenStore& xs, DomId self, DomId frontend, DevId devid, VifControl& vif,
                FeatureOptions features);
  /// Drops the watches. Writes nothing: call shutdown() first for an orderly close.
  ~BackendXenbus() = default;
  BackendXenbus(const BackendXenbus&) = delete;
  BackendXenbus& operator=(const BackendXenbus&) = delete;

  /// Registers the watches on the backend directory; their initial events (delivered through
  /// handle_watch like any other) start the probe.
  std::error_code start();

  /// Takes over a device an earlier daemon served (machine event BackendAdopted): validates
  /// the toolstack's keys and watches the frontend as a probe does, then walks the device to
  /// Closed with a new TAP and a fresh hotplug run. Call right after start(), for a directory
  /// found online and past state 1 when the daemon started. An error: nothing to adopt (the
  /// directory changed meanwhile) or the keys were refused (then reported as a fatal error).
  std::error_code adopt();
  void set_hotplug_runner(HotplugRunner runner) { hotplug_runner_ = std::move(runner); }

  /// True if `ev` belongs to this vif (its token starts with token_prefix()).
  [[nodiscard]] bool owns(const hv::XsWatchEvent& ev) const;
  void handle_watch(const hv::XsWatchEvent& ev);

  /// The frontend's domain died: release everything, write Closed.
  void frontend_domain_gone();
  /// The daemon is stopping: release everything, write Closed. Nothing happens afterwards.
  void shutdown();
  /// The data path disabled the vif (a frontend protocol violation, e.g. a TX chain of
  /// fatal-skb-slots): like xenbus_dev_fatal, write the error node and go to Closing, with the
  /// rings released. Called from the owner's thread, never from the data path (XSA-90). A
  /// no-op unless the rings are up (a report arriving after a teardown is stale).
  void fatal_from_datapath(int error, const std::string& message);

  [[nodiscard]] const BackendView& view() const { return view_; }
  [[nodiscard]] const std::string& backend_path() const { return backend_path_; }
  /// The validated toolstack keys, once probed.
  [[nodiscard]] const std::optional<BackendConfig>& backend_config() const { return config_; }
  /// True once the vif is torn down for good (the owner may destroy this object).
  [[nodiscard]] bool finished() const { return view_.removed || view_.shut_down; }

  /// "unetback/vif/<domid>/<devid>/": every watch token of this vif starts with it.
  [[nodiscard]] static std::string token_prefix(DomId frontend, DevId devid);

 private:
  void on_backend_state();
  void on_online();
  void on_hotplug_status();
  void on_frontend_state();
  void on_rate();
  void on_multicast_control();
  void on_mac_spoofing();

  void try_probe();
  /// Validates the toolstack's keys and watches the frontend; false (and ProbeFailed
  /// dispatched) when that fails.
  bool prepare_probe();
  void dispatch(Event first);
  std::optional<Event> execute(const Action& a);
  std::optional<Event> read_frontend_and_connect();
  /// Both state keys at 4: tries VifControl::adopt; true if the rings are ours again.
  bool adopt_rings();
  /// The connection's watches (rate, multicast control, MAC spoofing) and their last values.
  void watch_connection(const FrontendConfig& fe, const Rate& rate);
  std::optional<Event> apply_xdp_headroom();
  void drop_connection_watches();

  std::optional<std::string> read(const std::string& path);
  KeyReader reader_for(std::string dir);
  /// reader_for() that also appends what it reads to `*into`; while adopt() replays a handed
  /// over vif's keys it answers from those (xenstore only for a key they lack), unless
  /// `replay` is false (a watched key read again after the connect).
  KeyReader snapshot_reader(std::string dir, KeySnapshot* into, bool replay = true);
  std::error_code add_watch(hv::XsWatch& slot, const std::string& path, std::string_view kind);
  void warn_guest(const std::string& msg);
  /// Every line a frontend can trigger at will (its state changes included) goes through
  /// guest_log_limit_, so a guest cannot flood dom0's log (docs/security.md).
  void log_guest(log::Level level, const std::string& msg);

  hv::XenStore& xs_;
  VifControl& vif_;
  DomId self_;
  DomId frontend_;
  DevId devid_;
  FeatureOptions features_;
  std::string backend_path_;
  std::string token_prefix_;
  std::string log_prefix_;

  BackendView view_;
  std::optional<BackendConfig> config_;
  std::optional<Rate> last_rate_;
  std::optional<bool> last_multicast_control_;
  std::optional<bool> last_allow_mac_spoofing_;
  std::optional<std::uint32_t> last_xdp_headroom_;  // what the queues use, while connected
  KeySnapshot probe_keys_;                          // the toolstack's keys prepare_probe() read
  std::optional<KeySnapshot> replay_;  // adopt(): the keys a handed-over vif connected with

  hv::XsWatch state_watch_, online_watch_, hotplug_watch_, frontend_watch_;
  hv::XsWatch rate_watch_, multicast_watch_, mac_spoofing_watch_;
  log::RateLimit guest_log_limit_;
  HotplugRunner hotplug_runner_;
};

}  // namespace unetback::xenbus
