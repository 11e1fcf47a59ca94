#include "tools/xensim/domain_registry.hpp"

#include <cstring>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "common/hv/grant_table.hpp"
#include "common/hv/sim/broker_protocol.hpp"
#include "common/hv/sim/shared_grant_entry.hpp"
#include "common/util/log.hpp"
#include "common/wire/grant.hpp"
#include "tools/xensim/sealed_memfd.hpp"

namespace unetback::xensim {

namespace {

using hv::sim::kMaxPortsPerDomain;
using hv::sim::shared_u32;
using hv::sim::SharedGrantEntry;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > hv::sim::kMaxDomainNameLen) return false;
  for (const char c : name)
    if (c <= ' ' || c == '/' || c == 0x7f) return false;
  return true;
}

void signal_eventfd(int fd) {
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

}  // namespace

DomainRegistry::DomainRegistry(DomainListener& listener, RegistryConfig config)
    : listener_(listener), config_(config) {
  auto dom0 = make_domain(kDom0, "Domain-0", 0);
  if (!dom0) throw SetupError("cannot create dom0's control page: " + dom0.error().message());
  domains_.emplace(0, std::move(*dom0));
}

Result<Domain> DomainRegistry::make_domain(DomId id, std::string name, std::uint32_t nr_frames) {
  Domain d;
  d.id = id;
  d.name = std::move(name);
  const std::string tag = "xensim-dom" + std::to_string(id.value());
  auto ctl = make_sealed_memfd((tag + "-control").c_str(), hv::sim::kDomainControlSize);
  if (!ctl) return ctl.error();
  auto ctl_map = hv::sim::MappedRegion::map_shared(ctl->get(), hv::sim::kDomainControlSize,
                                                   PROT_READ | PROT_WRITE);
  if (!ctl_map) return ctl_map.error();
  d.control = std::move(*ctl);
  d.control_map = std::move(*ctl_map);
  d.ctl().magic = hv::sim::kControlMagic;
  d.ctl().version = 1;
  if (nr_frames == 0) return d;  // dom0: no memory of its own to grant

  d.nr_frames = nr_frames;
  d.nr_grant_entries = config_.grant_entries;
  auto mem = make_sealed_memfd((tag + "-memory").c_str(),
                               static_cast<std::size_t>(nr_frames) * hv::kPageSize);
  if (!mem) return mem.error();
  const std::size_t gnt_size =
      static_cast<std::size_t>(d.nr_grant_entries) * sizeof(SharedGrantEntry);
  auto gnt = make_sealed_memfd((tag + "-grants").c_str(), gnt_size);
  if (!gnt) return gnt.error();
  auto gnt_map = hv::sim::MappedRegion::map_shared(gnt->get(), gnt_size, PROT_READ | PROT_WRITE);
  if (!gnt_map) return gnt_map.error();
  d.memory = std::move(*mem);
  d.grants = std::move(*gnt);
  d.grant_map = std::move(*gnt_map);
  return d;
}

Result<DomId> DomainRegistry::create(std::string_view name, std::uint32_t nr_frames, bool driver) {
  if (!valid_name(name)) return errno_code(EINVAL);
  if (nr_frames == 0) nr_frames = config_.default_frames;
  if (nr_frames > config_.max_frames) return errno_code(EINVAL);
  for (const auto& [id, d] : domains_)
    if (d.name == name) return errno_code(EEXIST);
  if (next_domid_ >= kFirstReservedDomId.value()) return errno_code(ENOSPC);
  const DomId id{static_cast<std::uint16_t>(next_domid_)};
  auto d = make_domain(id, std::string(name), nr_frames);
  if (!d) return d.error();
  ++next_domid_;
  d->driver = driver;
  try {
    listener_.domain_introduced(id, name);
  } catch (const SetupError& e) {
    log::write(log::Level::error, "xensim",
               "cannot introduce domain " + std::string(name) + ": " + e.what());
    return errno_code(EIO);
  }
  domains_.emplace(id.value(), std::move(*d));
  log::write(log::Level::info, "xensim",
             "domain " + std::to_string(id.value()) + " (" + std::string(name) + ") created, " +
                 std::to_string(nr_frames) + " frames" + (driver ? ", a driver domain" : ""));
  return id;
}

std::error_code DomainRegistry::attach(DomId id, ClientId client, pid_t pid) {
  Domain* d = find(id);
  if (d == nullptr || id == kDom0) return errno_code(ESRCH);
  if (d->client) return errno_code(EBUSY);
  d->client = client;
  d->pid = pid;
  return {};
}

std::error_code DomainRegistry::join_backend(DomId id, ClientId client, pid_t pid) {
  Domain* d = find(id);
  if (d == nullptr || id == kDom0) return errno_code(ESRCH);
  if (!d->driver) return errno_code(EPERM);
  d->backends.emplace_back(client, pid);
  return {};
}

Domain* DomainRegistry::find(DomId id) {
  auto it = domains_.find(id.value());
  return it == domains_.end() ? nullptr : &it->second;
}

void DomainRegistry::release(DomId id) {
  if (id == kDom0) return;
  auto it = domains_.find(id.value());
  if (it == domains_.end()) return;
  Domain& d = it->second;
  std::vector<std::uint32_t> ports;
  for (const auto& [p, ep] : d.ports) ports.push_back(p);
  for (const std::uint32_t p : ports) close_port_locked(d, p);
  // ORDERING: release; a GrantTable's acquire load of `dead` then stops using the memory.
  shared_u32(d.ctl().dead).store(1, std::memory_order_release);
  log::write(log::Level::info, "xensim",
             "domain " + std::to_string(id.value()) + " (" + d.name + ") released");
  domains_.erase(it);
  listener_.domain_released(id);
}

void DomainRegistry::client_closed(ClientId client, std::optional<DomId> ran) {
  if (ran && *ran != kDom0) {
    Domain* d = find(*ran);
    if (d != nullptr && d->client == client) release(*ran);
    return;
  }
  backend_closed(client, kDom0);
}

void DomainRegistry::backend_closed(ClientId client, DomId in) {
  for (auto& [id, d] : domains_) release_pins(d, client);
  Domain* home = find(in);
  if (home == nullptr) return;  // the driver domain went first
  std::erase_if(home->backends, [client](const auto& b) { return b.first == client; });
  std::vector<std::uint32_t> ports;
  for (const auto& [p, ep] : home->ports)
    if (ep.owner == client) ports.push_back(p);
  for (const std::uint32_t p : ports) close_port_locked(*home, p);
}

Result<int> DomainRegistry::new_pin_table(DomId id, ClientId client) {
  Domain* d = find(id);
  if (d == nullptr || d->nr_grant_entries == 0) return errno_code(ESRCH);
  const std::string tag = "xensim-dom" + std::to_string(id.value()) + "-pins";
  auto fd =
      make_sealed_memfd(tag.c_str(), std::size_t{d->nr_grant_entries} * sizeof(hv::sim::GrantPins));
  if (!fd) return fd.error();
  const int raw = fd->get();
  d->pin_tables.push_back(PinTable{client, std::move(*fd)});
  return raw;
}

void DomainRegistry::release_pins(Domain& d, ClientId client) {
  const std::size_t n = d.nr_grant_entries;
  const std::size_t size = n * sizeof(hv::sim::GrantPins);
  std::vector<hv::sim::MappedRegion> others;
  std::vector<hv::sim::MappedRegion> dead;
  std::vector<PinTable> kept;
  for (auto& t : d.pin_tables) {
    auto m = hv::sim::MappedRegion::map_shared(t.fd.get(), size, PROT_READ);
    if (t.owner == client) {
      if (m) dead.push_back(std::move(*m));
    } else {
      if (m) others.push_back(std::move(*m));
      kept.push_back(std::move(t));
    }
  }
  if (dead.empty()) {
    d.pin_tables = std::move(kept);
    return;
  }
  auto* entries = d.grant_map.as<SharedGrantEntry>();
  std::uint32_t released = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t users = 0, writers = 0;
    for (const auto& m : dead) {
      users += m.as<hv::sim::GrantPins>()[i].users;
      writers += m.as<hv::sim::GrantPins>()[i].writers;
    }
    if (users == 0) continue;
    // Another live mapper of the same grant keeps what it holds (the limitation of
    // sim_grant_table.hpp: its count, not ours, decides).
    std::uint32_t other_users = 0, other_writers = 0;
    for (const auto& m : others) {
      other_users += m.as<hv::sim::GrantPins>()[i].users;
      other_writers += m.as<hv::sim::GrantPins>()[i].writers;
    }
    const std::uint16_t clear =
        static_cast<std::uint16_t>((other_users == 0 ? GTF_reading : 0) |
                                   (writers != 0 && other_writers == 0 ? GTF_writing : 0));
    // ORDERING: release, as SimGrantTable::unpin: the granter may reuse the page after this.
    if (clear != 0) {
      hv::sim::word_of(entries[i])
          .fetch_and(~static_cast<std::uint32_t>(clear), std::memory_order_release);
    }
    ++released;
  }
  d.pin_tables = std::move(kept);
  if (released != 0) {
    log::write(log::Level::info, "xensim",
               "domain " + std::to_string(d.id.value()) + ": released " + std::to_string(released) +
                   " grant(s) a dead process still held");
  }
}

void DomainRegistry::bump_gen(Domain& d, std::uint32_t port) {
  // ORDERING: release; pairs with the notifier's acquire load, which then asks again.
  shared_u32(d.ctl().ports[port].bind_gen).fetch_add(1, std::memory_order_release);
}

Result<std::uint32_t> DomainRegistry::new_port(Domain& d, ClientId client, DomId remote) {
  std::uint32_t port = 1;
  for (const auto& [p, ep] : d.ports) {
    if (p != port) break;
    ++port;
  }
  if (port >= kMaxPortsPerDomain) return errno_code(ENOSPC);
  UniqueFd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!efd) return last_errno();
  auto& pc = d.ctl().ports[port];
  shared_u32(pc.drop).store(0, std::memory_order_relaxed);
  shared_u32(pc.held).store(0, std::memory_order_relaxed);
  EventPort ep;
  ep.owner = client;
  ep.eventfd = std::move(efd);
  ep.remote_dom = remote;
  d.ports.emplace(port, std::move(ep));
  bump_gen(d, port);
  return port;
}

Result<std::uint32_t> DomainRegistry::alloc_unbound(DomId self, ClientId client, DomId remote) {
  Domain* d = find(self);
  if (d == nullptr) return errno_code(ESRCH);
  return new_port(*d, client, remote);
}

Result<std::uint32_t> DomainRegistry::bind_interdomain(DomId self, ClientId client, DomId remote,
                                                       std::uint32_t remote_port) {
  Domain* ld = find(self);
  Domain* rd = find(remote);
  if (ld == nullptr || rd == nullptr) return errno_code(ESRCH);
  auto rit = rd->ports.find(remote_port);
  // Xen: the remote port must be ECS_UNBOUND and allocated for us.
  if (rit == rd->ports.end() || rit->second.remote_port != 0 || rit->second.remote_dom != self)
    return errno_code(EINVAL);
  auto lp = new_port(*ld, client, remote);
  if (!lp) return lp;
  // A loopback binding (self == remote) may have rehashed nothing: std::map keeps iterators.
  ld->ports.at(*lp).remote_port = remote_port;
  rit->second.remote_port = *lp;
  bump_gen(*rd, remote_port);
  bump_gen(*ld, *lp);
  return lp;
}

void DomainRegistry::close_port_locked(Domain& d, std::uint32_t port) {
  auto it = d.ports.find(port);
  if (it == d.ports.end()) return;
  const EventPort& ep = it->second;
  if (ep.remote_port != 0) {
    // Xen's evtchn_close: the peer goes back to ECS_UNBOUND, still for our domain.
    if (Domain* rd = find(ep.remote_dom)) {
      auto rit = rd->ports.find(ep.remote_port);
      if (rit != rd->ports.end() && rit->second.remote_port == port) {
        rit->second.remote_port = 0;
        bump_gen(*rd, ep.remote_port);
      }
    }
  }
  d.ports.erase(it);
  bump_gen(d, port);
}

std::error_code DomainRegistry::close_port(DomId self, ClientId client, std::uint32_t port) {
  Domain* d = find(self);
  if (d == nullptr) return errno_code(ESRCH);
  auto it = d->ports.find(port);
  if (it == d->ports.end() || it->second.owner != client) return errno_code(EINVAL);
  close_port_locked(*d, port);
  return {};
}

bool DomainRegistry::owns_port(DomId self, ClientId client, std::uint32_t port) const {
  const auto d = domains_.find(self.value());
  if (d == domains_.end()) return false;
  const auto it = d->second.ports.find(port);
  return it != d->second.ports.end() && it->second.owner == client;
}

Result<PeerInfo> DomainRegistry::peer(DomId self, std::uint32_t port) {
  Domain* d = find(self);
  if (d == nullptr) return errno_code(ESRCH);
  auto it = d->ports.find(port);
  if (it == d->ports.end()) return errno_code(EINVAL);
  PeerInfo info;
  info.bind_gen = shared_u32(d->ctl().ports[port].bind_gen).load(std::memory_order_relaxed);
  if (it->second.remote_port == 0) return info;
  Domain* rd = find(it->second.remote_dom);
  if (rd == nullptr) return info;
  auto rit = rd->ports.find(it->second.remote_port);
  if (rit == rd->ports.end()) return info;
  info.bound = true;
  info.domid = rd->id;
  info.port = rit->first;
  info.eventfd = rit->second.eventfd.get();
  info.control = rd->control.get();
  return info;
}

std::error_code DomainRegistry::revoke_grant(DomId id, std::uint32_t ref) {
  Domain* d = find(id);
  if (d == nullptr || d->grant_map.empty()) return errno_code(ESRCH);
  if (ref >= d->nr_grant_entries) return errno_code(EINVAL);
  auto word = hv::sim::word_of(d->grant_map.as<SharedGrantEntry>()[ref]);
  // Only the type bits go: GTF_reading/GTF_writing belong to the mapper, which clears them.
  word.fetch_and(~static_cast<std::uint32_t>(wire::kGtfTypeMask), std::memory_order_seq_cst);
  return {};
}

std::error_code DomainRegistry::corrupt_grant(DomId id, std::uint32_t ref, DomId new_domid,
                                              std::uint32_t new_frame) {
  Domain* d = find(id);
  if (d == nullptr || d->grant_map.empty()) return errno_code(ESRCH);
  if (ref >= d->nr_grant_entries) return errno_code(EINVAL);
  SharedGrantEntry& e = d->grant_map.as<SharedGrantEntry>()[ref];
  hv::sim::frame_of(e).store(new_frame, std::memory_order_seq_cst);
  auto word = hv::sim::word_of(e);
  std::uint32_t cur = word.load(std::memory_order_relaxed);
  while (!word.compare_exchange_weak(
      cur, hv::sim::entry_word(hv::sim::entry_flags(cur), new_domid.value()),
      std::memory_order_seq_cst)) {
  }
  return {};
}

std::error_code DomainRegistry::drop_events(DomId id, std::uint32_t port, std::uint32_t count) {
  Domain* d = find(id);
  if (d == nullptr) return errno_code(ESRCH);
  if (!d->ports.contains(port)) return errno_code(EINVAL);
  shared_u32(d->ctl().ports[port].drop).store(count, std::memory_order_seq_cst);
  return {};
}

std::error_code DomainRegistry::stall(DomId id, bool stalled) {
  Domain* d = find(id);
  if (d == nullptr) return errno_code(ESRCH);
  shared_u32(d->ctl().stalled).store(stalled ? 1 : 0, std::memory_order_seq_cst);
  if (stalled) return {};
  // After clearing `stalled`: a sender that set `held` before seeing it clear either left
  // the bit for us or takes it back itself (see SimEventChannel::notify); exchange makes
  // sure exactly one of us delivers.
  for (auto& [p, ep] : d->ports) {
    if (shared_u32(d->ctl().ports[p].held).exchange(0, std::memory_order_seq_cst) != 0)
      signal_eventfd(ep.eventfd.get());
  }
  return {};
}

}  // namespace unetback::xensim
