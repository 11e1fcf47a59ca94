// Vif: one virtual interface of one guest, as the daemon drives it (VifHandle).
//
// create_tap() makes the host side `vif<domid>.<devid>` (multi-queue, vnet_hdr, offloads,
// every queue fd opened at once, marked by its ifalias) before the backend announces InitWait,
// so the hotplug script finds it (and may rename it to B:vifname); connect() maps each
// queue's rings, binds its event channels and starts it on an event-loop thread;
// disconnect() stops and releases everything; destroy_tap() removes the host side.
// All of these run on the daemon's thread; the data paths run on the queues' threads.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/vif/ctrl_ring.hpp"
#include "backend/vif/hash.hpp"
#include "backend/vif/switch_registry.hpp"
#include "backend/vif/tap_keeper.hpp"
#include "backend/vif/vif_handle.hpp"
#include "backend/vif/vif_queue.hpp"
#include "backend/vif/vif_record.hpp"
#include "common/event/event_loop_pool.hpp"
#include "common/hv/hypervisor.hpp"
#include "common/net/tap_device.hpp"
#include "common/util/fd_reserve.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {

/// The ifalias of a vif's TAP: "unetbackd <backend path>". vif-unetback (tools/hotplug)
/// compares it with its own B before it renames, unbridges or downs a device.
[[nodiscard]] std::string tap_alias(const std::string& backend_path);

/// Whether the interface at `ifindex` is the TAP a daemon made for the vif at `backend_path`:
/// its ifalias says so (set at creation; vif-unetback checks the same).
[[nodiscard]] bool is_vifs_tap(int ifindex, const std::string& backend_path);

class Vif final : public VifHandle {
 public:
  /// `on_disabled` runs (on a queue's thread) when the data path finds a protocol violation;
  /// the daemon then calls disabled() from its own thread and reports it through xenbus.
  /// `switches`: where a vif whose B:bridge is "unetback:<name>" finds its internal switch
  /// (nullptr: such a vif fails to connect). `fd_reserve`: the descriptors a connect must
  /// leave free (nullptr: no such check).
  /// `state_dir`: where the vif keeps its record (vif_record.hpp) and makes its TAP persistent,
  /// so that a successor can adopt it; empty: neither (the vif reconnects after a restart).
  /// `tap_keeper`: who holds the TAP's queues open from the first adoptable connect until the
  /// TAP is removed (tap_keeper.hpp; nullptr: nobody, the TAP loses its carrier while no
  /// daemon runs).
  Vif(hv::Hypervisor& hv, event::EventLoopPool& loops, DomId frontend, DevId devid,
      Tunables tunables, std::function<void()> on_disabled, SwitchRegistry* switches = nullptr,
      const FdReserve* fd_reserve = nullptr, std::filesystem::path state_dir = {},
      TapKeeper* tap_keeper = nullptr);
  ~Vif() override;

  std::error_code create_tap(const xenbus::BackendConfig& be) override;
  void destroy_tap() override;
  /// Whatever fails (a guest's bad values, or the daemon out of descriptors or memory) is
  /// this vif's error, with nothing of the half-made connect left; connect never throws.
  std::error_code connect(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be,
                          const xenbus::Rate& rate) override;
  void disconnect() override;
  std::error_code adopt(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be,
                        const xenbus::Rate& rate) override;
  void adoption_refused() override { adopted_ = "reconnected"; }
  void remember_keys(const xenbus::KeySnapshot& keys) override { connect_keys_ = keys; }
  void keys_applied(const xenbus::KeySnapshot& keys) override;
  [[nodiscard]] std::optional<xenbus::KeySnapshot> handed_over_keys() override;
  void hand_over() override;
  void rate_changed(const xenbus::Rate& rate) override;
  void multicast_control_changed(bool enabled) override;
  void mac_spoofing_changed(bool allowed) override;
  void xdp_headroom_changed(std::uint32_t headroom) override;

  [[nodiscard]] VifReport report() const override;
  [[nodiscard]] bool disabled() const override { return disabled_.load(); }
  /// Why the data path disabled the vif (empty while it is not disabled). Any thread.
  [[nodiscard]] std::string disabled_reason() const {
    const std::lock_guard lock(reason_mu_);
    return disabled_reason_;
  }

 private:
  void on_queue_carrier(bool ok);
  /// Lines a frontend can trigger at will (reconnect loops, a fatal per connection) are
  /// rate-limited per vif (docs/security.md: a guest can flood logs).
  void log_guest(log::Level level, const std::string& msg);
  /// Joins the switch and builds and starts every queue into `queues`; may throw.
  std::error_code connect_queues(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be,
                                 const xenbus::Rate& rate,
                                 std::vector<std::unique_ptr<VifQueue>>& queues);
  Result<std::unique_ptr<VifQueue>> make_queue(const xenbus::FrontendConfig& fe,
                                               std::uint32_t index, const xenbus::Rate& rate,
                                               std::optional<SwitchAttachment> sw);
  /// Maps and attaches queue `index`'s rings into `res`; when adopting, settles them first
  /// from the record (vif_record.hpp). Then starts the queue's part of the record.
  std::error_code map_rings(const xenbus::QueueConfig& q, std::uint32_t index, QueueResources& res);
  /// Makes the record and the persistent TAP of a fresh connect (no state dir: nothing).
  std::error_code start_record(std::uint32_t nr_queues);
  /// An adoption needs this vif's kind of connection: no internal switch, no control ring.
  [[nodiscard]] static bool adoptable(const xenbus::FrontendConfig& fe,
                                      const xenbus::BackendConfig& be);
  /// Stops the control ring and every queue (each between two passes) and releases them;
  /// true if there were any.
  bool stop_queues();
  /// The queues and the control ring out of the vif, each stopped between two passes, nothing
  /// released yet.
  struct Halted {
    std::vector<std::unique_ptr<VifQueue>> queues;
    std::unique_ptr<CtrlRing> ctrl;
  };
  Halted halt_queues();
  /// Leaves the internal switch (no packet is routed to us after it).
  void leave_switch();
  /// The TAP's queues to the keeper (the record is live), or back from it.
  void keep_tap();
  void forget_tap();
  /// The record goes (nothing for a successor to adopt), and with it what the keeper holds.
  void drop_record();
  /// A queue or the control ring found a protocol violation (any thread): the first reason
  /// is kept and the daemon told once.
  void report_fatal(const std::string& why);

  hv::Hypervisor& hv_;
  event::EventLoopPool& loops_;
  DomId frontend_;
  DevId devid_;
  Tunables tunables_;
  std::function<void()> on_disabled_;
  SwitchRegistry* switches_;
  const FdReserve* fd_reserve_;
  std::filesystem::path state_dir_;
  TapKeeper* tap_keeper_;
  int kept_ifindex_ = 0;              // the TAP whose queues tap_keeper_ holds for us (0: none)
  VifRecord record_;                  // while connected with a state dir
  bool adopting_ = false;             // adopt() is building the queues (daemon's thread)
  Halted left_to_kernel_;             // hand_over(): stopped, released by the execve or exit
  bool handed_over_ = false;          // the record and the TAP are the successor's
  xenbus::KeySnapshot connect_keys_;  // what the coming connect was read from (its record's)
  std::string adopted_ = "fresh";
  std::string prefix_;
  std::optional<net::TapDevice> tap_;
  std::shared_ptr<VSwitch> switch_;  // while connected to an internal switch
  SwitchPortId switch_port_ = 0;
  /// B:unetback-allow-mac-spoofing, read by the queues' TX paths on a switch (any thread).
  std::shared_ptr<std::atomic<bool>> allow_mac_spoofing_ = std::make_shared<std::atomic<bool>>();
  mutable std::mutex mu_;  // guards queues_ against report() from the control thread
  std::vector<std::unique_ptr<VifQueue>> queues_;
  std::unique_ptr<CtrlRing> ctrl_;  // while connected with a control ring (guarded by mu_)
  /// While connecting: the hash settings and steering links the queues are built with.
  std::shared_ptr<SharedHashSettings> hash_;
  std::shared_ptr<const std::vector<std::shared_ptr<QueueLink>>> steer_;
  /// The guest-RX multicast filter, shared by the queues (emptied at every connect).
  std::shared_ptr<McastFilter> mcast_ = std::make_shared<McastFilter>();
  /// Queues whose guest RX is stalled; the TAP's carrier is off while any is.
  std::atomic<int> stalled_queues_{0};
  std::atomic<bool> disabled_{false};
  mutable std::mutex reason_mu_;  // written on a queue's thread, read on the daemon's
  std::string disabled_reason_;
  log::RateLimit log_limit_;
};

/// After the daemon's first scan: every record in `state_dir` of a vif not `in_use` (its guest
/// died, or its device went, while no daemon ran) is deleted, and the persistent TAP it names
/// removed if that is still the vif's (its ifalias names the vif's directory under
/// `backend_root`), so nothing of it stays behind. Returns how many.
std::size_t release_left_behind(const std::filesystem::path& state_dir,
                                const std::string& backend_root,
                                const std::function<bool(DomId, DevId)>& in_use);

class VifFactoryImpl final : public VifFactory {
 public:
  /// `switch_uplinks`: internal switches made at once with an uplink TAP (name -> TAP name);
  /// the others are made when a vif first names them.
  /// `fd_reserve`: what every vif's connect must leave free (nullptr: no check).
  /// `state_dir`: the vifs' records (empty: no adoption after a restart).
  VifFactoryImpl(hv::Hypervisor& hv, event::EventLoopPool& loops, std::function<void()> on_disabled,
                 const std::map<std::string, std::string>& switch_uplinks = {},
                 const FdReserve* fd_reserve = nullptr, std::filesystem::path state_dir = {},
                 TapKeeper* tap_keeper = nullptr)
      : hv_(hv),
        loops_(loops),
        on_disabled_(std::move(on_disabled)),
        switches_(switch_uplinks),
        fd_reserve_(fd_reserve),
        state_dir_(std::move(state_dir)),
        tap_keeper_(tap_keeper) {}
  std::unique_ptr<VifHandle> make_vif(DomId frontend, DevId devid,
                                      const Tunables& tunables) override {
    return std::make_unique<Vif>(hv_, loops_, frontend, devid, tunables, on_disabled_, &switches_,
                                 fd_reserve_, state_dir_, tap_keeper_);
  }

 private:
  hv::Hypervisor& hv_;
  event::EventLoopPool& loops_;
  std::function<void()> on_disabled_;
  SwitchRegistry switches_;
  const FdReserve* fd_reserve_;
  std::filesystem::path state_dir_;
  TapKeeper* tap_keeper_;
};

}  // namespace unetback::vif
