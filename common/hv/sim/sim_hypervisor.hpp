// SimHypervisor: the Hypervisor bundle for a xensim world (a directory where the `xensim`
// daemon runs: DIR/hv.sock is its broker, DIR/dom<N>.sock its xenstored socket for domain N).
//
// Backend role: registers as dom0 and provides the GrantTable (SimGrantTable). Frontend
// role: registers a fresh domain (named opts.name) or claims opts.domid, one the toolstack
// created, and provides the GrantSharer over the domain's memory. The domain lives as long
// as this object (its broker connection); destroying it is the domain's death.
//
// Beyond the Hypervisor interface it offers what a toolstack and tests need: domain
// creation and destruction, and fault injection (dom0 only).
//
// Everything it hands out (grant table, sharer, event channels, their MappedGrants,
// SharedPages and BoundPorts) must be gone before it is destroyed. Its parts may be used
// from different threads (broker requests are serialised on its one connection), except
// that GrantTable::copy() is not reentrant.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "common/hv/hypervisor.hpp"

namespace unetback::hv {

namespace sim {
class BrokerClient;
class ControlPageCache;
class MappedRegion;
class SimGrantTable;
class SimGrantSharer;
}  // namespace sim

class SimHypervisor final : public Hypervisor {
 public:
  /// Connects to WORLD_DIR/hv.sock and registers. Throws SetupError naming the socket if
  /// xensim is not running there, or saying why registration failed.
  SimHypervisor(std::string world_dir, const HypervisorOptions& opts);
  ~SimHypervisor() override;
  SimHypervisor(const SimHypervisor&) = delete;
  SimHypervisor& operator=(const SimHypervisor&) = delete;

  [[nodiscard]] DomId self() const override { return self_; }
  GrantTable& grant_table() override;
  std::unique_ptr<GrantTable> open_grant_table() override;
  GrantSharer& grant_sharer() override;
  std::unique_ptr<EventChannel> open_event_channel() override;
  /// A LibXenStore on WORLD_DIR/dom<self>.sock.
  std::unique_ptr<XenStore> open_xenstore() override;
  [[nodiscard]] bool domain_exists(DomId domid) override;
  /// RESTRICT_CLIENT on this handle's broker connection: xensim enforces it, for every event
  /// channel of the connection and for its toolstack operations.
  std::error_code restrict_to_domain(DomId serve) override;

  [[nodiscard]] const std::string& world_dir() const { return dir_; }
  /// The sharer with its xensim extras (deferred revokes); frontend role only.
  sim::SimGrantSharer& sim_grant_sharer();

  // --- toolstack (dom0 only) ---
  /// Creates domain `name` with `nr_frames` frames of memory (0: xensim's --frames) and
  /// introduces it to xenstored; a frontend process then claims it (opts.domid). A driver
  /// domain is joined by backend processes instead (Role::backend with opts.domid).
  Result<DomId> create_domain(std::string_view name, std::uint32_t nr_frames = 0,
                              bool driver_domain = false);
  /// Kills the process running `domid` (SIGKILL) and releases the domain.
  std::error_code destroy_domain(DomId domid);

  // --- fault injection (dom0 only) ---
  /// Clears GTF_permit_access of `ref` in `granter`'s table, as a guest revoking a grant
  /// under the backend's feet (GTF_reading/GTF_writing are left as they are).
  std::error_code inject_revoke_grant(DomId granter, GrantRef ref);
  /// Rewrites `ref` in `granter`'s table to name `domid` and `frame` (flags kept).
  std::error_code inject_corrupt_grant(DomId granter, GrantRef ref, DomId domid,
                                       std::uint32_t frame);
  /// The next `count` notifications to port `port` of `domid` are lost.
  std::error_code inject_drop_events(DomId domid, Port port, std::uint32_t count);
  /// Stalls `domid` (notifications to it are held) or releases it (each port with held
  /// notifications gets one event).
  std::error_code inject_stall(DomId domid, bool stalled);

 private:
  std::string dir_;
  DomId self_{};
  std::size_t copy_batch_ = 64;
  std::unique_ptr<sim::BrokerClient> broker_;
  std::unique_ptr<sim::ControlPageCache> peers_;
  std::shared_ptr<sim::MappedRegion> own_control_;
  std::unique_ptr<sim::SimGrantTable> table_;
  std::unique_ptr<sim::SimGrantSharer> sharer_;
  std::optional<DomId> serves_;  // restrict_to_domain()
  std::atomic<bool> opened_event_channels_ = false;
};

/// Opens the xensim world in `world_dir` (see SimHypervisor).
std::unique_ptr<Hypervisor> open_sim_hypervisor(std::string world_dir,
                                                const HypervisorOptions& opts);

}  // namespace unetback::hv
