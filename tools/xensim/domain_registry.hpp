// DomainRegistry: the state of xensim's hypervisor broker. Domains (memory, grant table,
// control page), their event-channel ports, and the fault-injection state, with the rules
// of Xen's domain.c / event_channel.c that a guest or backend can observe. No sockets here:
// the Broker translates requests into these calls, and a DomainListener (xenstored) hears
// about domains coming and going.
//
// Domain ids start at 1 and are never reused within one xensim run, so a stale id can only
// name a dead domain, never another one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

#include "common/hv/sim/domain_control.hpp"
#include "common/hv/sim/mapped_region.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::xensim {

/// Identifies one broker connection (a process's hv.sock connection).
using ClientId = std::uint64_t;

class DomainListener {
 public:
  /// A domain exists now (xenstored: introduce it). May throw SetupError: the domain is
  /// then not created.
  virtual void domain_introduced(DomId id, std::string_view name) = 0;
  /// A domain is gone (xenstored: release it, fire @releaseDomain).
  virtual void domain_released(DomId id) = 0;

 protected:
  ~DomainListener() = default;
};

struct RegistryConfig {
  std::uint32_t default_frames = 32768;  // 128 MiB of (sparse) memory per domain
  std::uint32_t max_frames = 1U << 20;   // 4 GiB
  std::uint32_t grant_entries = 16384;   // 32 grant-table frames of v1 entries
};

/// One event-channel port.
struct EventPort {
  ClientId owner = 0;             // the connection that made it (a dom0 port dies with it)
  UniqueFd eventfd;               // the broker's copy; the owner has another descriptor
  DomId remote_dom{};             // ECS_UNBOUND: who may bind; interdomain: the peer domain
  std::uint32_t remote_port = 0;  // 0: unbound (ports start at 1)
};

/// A dom0 process's pin table for one domain (broker_protocol.hpp, GET_DOMAIN_MEMORY).
struct PinTable {
  ClientId owner = 0;
  UniqueFd fd;
};

struct Domain {
  DomId id;
  std::string name;
  std::uint32_t nr_frames = 0;
  std::uint32_t nr_grant_entries = 0;
  UniqueFd memory, grants, control;
  hv::sim::MappedRegion grant_map, control_map;
  std::optional<ClientId> client;  // the process running it (none: created, not running)
  pid_t pid = 0;
  /// libxl's driver_domain=1: backend processes may join it (they map and copy other
  /// domains' grants as it). It lives until destroyed, whoever joins or leaves.
  bool driver = false;
  /// The backend processes joined to this driver domain (broker client, pid).
  std::vector<std::pair<ClientId, pid_t>> backends;
  std::map<std::uint32_t, EventPort> ports;
  std::vector<PinTable> pin_tables;

  [[nodiscard]] hv::sim::DomainControl& ctl() const {
    return *control_map.as<hv::sim::DomainControl>();
  }
};

/// Where the peer of a port is (EVTCHN_PEER).
struct PeerInfo {
  std::uint32_t bind_gen = 0;
  bool bound = false;
  DomId domid{};
  std::uint32_t port = 0;
  int eventfd = -1;  // borrowed from the registry
  int control = -1;  // borrowed
};

class DomainRegistry {
 public:
  /// Creates dom0 (no memory). Throws SetupError if its control page cannot be made.
  DomainRegistry(DomainListener& listener, RegistryConfig config = {});
  DomainRegistry(const DomainRegistry&) = delete;
  DomainRegistry& operator=(const DomainRegistry&) = delete;

  /// A new domain with its memory, grant table and control page, introduced to the
  /// listener. EEXIST: name in use; EINVAL: bad name or size; ENOSPC: no domid left.
  Result<DomId> create(std::string_view name, std::uint32_t nr_frames, bool driver = false);
  /// `client` (process `pid`) runs `id`. EBUSY if someone already does; ESRCH unknown.
  std::error_code attach(DomId id, ClientId client, pid_t pid);
  /// `client` (process `pid`) is a backend process inside driver domain `id` (any number of
  /// them). ESRCH unknown or dom0; EPERM not a driver domain.
  std::error_code join_backend(DomId id, ClientId client, pid_t pid);
  [[nodiscard]] Domain* find(DomId id);
  [[nodiscard]] bool exists(DomId id) const { return domains_.contains(id.value()); }
  /// The domain dies: its ports close (peers become unbound), its control page says dead,
  /// the listener hears of it, and it is forgotten.
  void release(DomId id);
  /// A broker connection closed: the domU it ran dies; dom0 ports it made close, and the
  /// grants it still held (its pin tables) are released as gntdev does at process exit.
  void client_closed(ClientId client, std::optional<DomId> ran);
  /// A backend process's connection closed (dom0's or a driver domain's): the ports it made
  /// in `in` close and the grants it still held are released; the domain lives on.
  void backend_closed(ClientId client, DomId in);
  /// A new zeroed pin table of `id`'s grant entries for `client` (its fd stays here).
  Result<int> new_pin_table(DomId id, ClientId client);

  /// EVTCHNOP_alloc_unbound for `self` (port owned by `client`). Returns the port; its
  /// eventfd is `find(self)->ports[port].eventfd`.
  Result<std::uint32_t> alloc_unbound(DomId self, ClientId client, DomId remote);
  /// EVTCHNOP_bind_interdomain: EINVAL unless `remote_port` is unbound and allocated for
  /// `self`; ESRCH unknown domain.
  Result<std::uint32_t> bind_interdomain(DomId self, ClientId client, DomId remote,
                                         std::uint32_t remote_port);
  /// EVTCHNOP_close: the peer (if any) becomes unbound. EINVAL if not a port of `self`
  /// made by `client`.
  std::error_code close_port(DomId self, ClientId client, std::uint32_t port);
  Result<PeerInfo> peer(DomId self, std::uint32_t port);
  /// Whether `port` of `self` exists and was bound by `client`.
  [[nodiscard]] bool owns_port(DomId self, ClientId client, std::uint32_t port) const;

  // Fault injection.
  std::error_code revoke_grant(DomId id, std::uint32_t ref);
  std::error_code corrupt_grant(DomId id, std::uint32_t ref, DomId new_domid,
                                std::uint32_t new_frame);
  std::error_code drop_events(DomId id, std::uint32_t port, std::uint32_t count);
  std::error_code stall(DomId id, bool stalled);

  [[nodiscard]] std::size_t domain_count() const { return domains_.size(); }

 private:
  Result<Domain> make_domain(DomId id, std::string name, std::uint32_t nr_frames);
  static void bump_gen(Domain& d, std::uint32_t port);
  void close_port_locked(Domain& d, std::uint32_t port);
  /// Clears the bits `client`'s tables of `d` still hold, unless another table holds them.
  static void release_pins(Domain& d, ClientId client);
  Result<std::uint32_t> new_port(Domain& d, ClientId client, DomId remote);

  DomainListener& listener_;
  RegistryConfig config_;
  std::uint32_t next_domid_ = 1;
  std::unordered_map<std::uint16_t, Domain> domains_;
};

}  // namespace unetback::xensim
