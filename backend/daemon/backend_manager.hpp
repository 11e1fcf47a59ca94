// BackendManager: the daemon's control plane. One per daemon, one XenStore connection.
//
// It watches `/local/domain/<self>/backend/vif` (where libxl creates `<domid>/<devid>`), makes
// a VifHandle (through the VifFactory) and a BackendXenbus for every new device directory,
// routes each watch event to the vif that owns it, tears vifs down when their frontend domain
// dies (@releaseDomain), turns a data path's "disabled" into a xenbus fatal error from this
// thread (XSA-90: never from the data path), and destroys vifs whose BackendXenbus finished.
//
// Threading: single-threaded. Its owner (main, or a test) calls process_events() whenever
// XenStore::watch_fd() is readable and check_vifs() periodically (run() does both on an
// io_context). VifHandle methods may be called from here while the vif's data path runs on
// its own threads (the vif layer makes them thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/daemon/hotplug_launcher.hpp"
#include "backend/daemon/tunables.hpp"
#include "backend/vif/vif_handle.hpp"
#include "backend/xenbus/xenbus_adapter.hpp"
#include "common/control/vif_id.hpp"
#include "common/hv/xenstore.hpp"
#include "common/util/log.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::daemon {

// The manager names a vif as the control protocol does.
using control::format_vif_id;
using control::VifId;

/// What `unetback-ctl list` shows of one vif: the xenbus view plus the vif's report.
struct VifStatus {
  VifId id;
  xenbus::BackendView view;
  vif::VifReport report;
};

class BackendManager {
 public:
  /// Whether a domain still exists (Hypervisor::domain_exists in the daemon).
  using DomainExists = std::function<bool(DomId)>;

  /// Nothing happens until start(). Every reference must outlive the manager.
  BackendManager(hv::XenStore& xs, DomId self, vif::VifFactory& factory, TunableStore& tunables,
                 DomainExists domain_exists);
  /// Destroys the vifs without writing anything (call shutdown() first for an orderly stop).
  ~BackendManager();
  BackendManager(const BackendManager&) = delete;
  BackendManager& operator=(const BackendManager&) = delete;

  /// Starts the tunables, then watches the backend tree and @releaseDomain. The watches'
  /// initial events (handled by process_events) pick up devices that already exist: those
  /// still online and past state 1 were served by an earlier daemon and are adopted
  /// (BackendXenbus::adopt), with their hotplug script re-run through `hotplug` if set.
  std::error_code start();
  /// Scans the backend tree now, before any watch event is handled (after start() and
  /// set_hotplug_launcher()): the devices an earlier daemon served are adopted at once instead
  /// of behind the first round's other initial events (the tunables' re-read: a dozen xenstore
  /// round trips, each milliseconds in a loaded dom0). The backends watch's initial event then
  /// finds them served. A no-op once the first scan is done.
  void adopt_found();
  /// Where adopted devices' hotplug scripts run (must outlive the manager); without one they
  /// wait for someone else to run the script.
  void set_hotplug_launcher(HotplugLauncher* launcher) { hotplug_ = launcher; }

  /// Handles queued watch events (each followed by check_vifs()), at most `max_events`, so a
  /// flood cannot starve the control socket or the other guests: the connection merges an
  /// event into an identical pending one (XSA-349), so a guest rewriting its F:state holds one
  /// place in the queue however fast it writes. Returns true if events remain: call again
  /// (the watch fd may not be readable for them).
  bool process_events(std::size_t max_events = kEventsPerRound);
  /// True once the first scan of backend/vif is done (the backends watch's initial event):
  /// from then on every vif in xenstore is being served.
  [[nodiscard]] bool initial_scan_done() const { return initial_scan_done_; }
  static constexpr std::size_t kEventsPerRound = 64;
  /// The XenStore connection's error once it is gone for good (nothing will ever be
  /// watched or written again: the daemon must exit), else none.
  [[nodiscard]] std::error_code xenstore_error() const { return xs_.connection_error(); }
  /// Reports disabled vifs fatal and destroys finished ones.
  void check_vifs();

  /// Closes every vif (state 6 written, TAP gone) and stops reacting to events.
  void shutdown();
  /// A planned takeover: every vif's queues stop at a pass boundary and its record is marked
  /// handed over, its TAP kept; nothing is written to xenstore (the frontends stay Connected
  /// for the successor to adopt). Stops reacting to events.
  /// `at_step(n)` runs at step 1 (nothing done yet), 2 (the first vif handed over) and 3
  /// (every vif handed over): fault injection kills the daemon there.
  /// The vifs stay, inert (VifHandle::hand_over): the daemon's image ends right after.
  void hand_over(const std::function<void(int)>& at_step = {});

  [[nodiscard]] std::vector<VifStatus> list() const;
  [[nodiscard]] std::optional<VifStatus> status(const VifId& id) const;
  /// Whether a state record (and the TAP it names) of `id` was left behind by a guest that
  /// went while no daemon ran: no vif of this daemon serves it, and xenstore says its device
  /// is gone or offline, or the hypervisor that its domain is. Any other answer, an error
  /// included (a first scan that failed found no vif at all), keeps it: a record deleted under
  /// a live guest costs it its network until it reconnects, a kept one only a TAP.
  [[nodiscard]] bool left_behind(const VifId& id);
  [[nodiscard]] std::size_t vif_count() const { return vifs_.size(); }
  [[nodiscard]] TunableStore& tunables() { return tunables_; }
  [[nodiscard]] const std::string& backend_root() const { return root_; }

  static constexpr std::string_view kBackendsToken = "unetback/backends";
  static constexpr std::string_view kReleaseToken = "unetback/release-domain";

 private:
  struct Vif {
    std::unique_ptr<vif::VifHandle> handle;
    std::unique_ptr<xenbus::BackendXenbus> xenbus;
  };

  /// Routes one watch event to whoever owns it.
  void dispatch(const hv::XsWatchEvent& ev);
  void on_backends_event(const std::string& path);
  void scan_backends();
  void scan_domain_entry(const std::string& dom_name, const std::optional<std::string>& dev_name);
  void consider(const std::string& dom_name, DomId domid, const std::string& dev_name);
  void add_vif(const VifId& id, bool adopt);
  void run_hotplug(const VifId& id);
  /// As a hotplug script's `fatal` does (and what libxl then shows): B:hotplug-error = why,
  /// B:hotplug-status = error, which the vif's xenbus machine handles as any script failure.
  void report_hotplug_failure(const VifId& id, const std::string& why);
  void reap_hotplug();
  void on_release_domain();
  void warn_junk(const std::string& msg);

  hv::XenStore& xs_;
  DomId self_;
  vif::VifFactory& factory_;
  TunableStore& tunables_;
  DomainExists domain_exists_;
  std::string root_;  // /local/domain/<self>/backend/vif
  std::map<VifId, Vif> vifs_;
  hv::XsWatch backends_watch_, release_watch_;
  bool shut_down_ = false;
  bool initial_scan_done_ = false;  // devices seen before it are adopted
  HotplugLauncher* hotplug_ = nullptr;
  log::RateLimit junk_log_limit_;
  log::RateLimit guest_log_limit_;
};

}  // namespace unetback::daemon
