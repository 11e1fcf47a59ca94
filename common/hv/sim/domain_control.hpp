// The per-domain control page xensim shares (a memfd made by the broker) with every process
// that talks to the domain's ports: where the broker publishes what a process cannot learn
// from its own eventfds.
//
// * `dead`: set when the domain is released, so a GrantTable holding a cached mapping of its
//   memory answers GNTST_bad_domain from then on, as Xen does for a dying domain.
// * per port `bind_gen`: bumped whenever the port's binding changes (bound, peer closed), so
//   a notifier that cached its peer's eventfd notices and asks the broker again.
// * fault injection (`stalled`, per port `drop` and `held`): applied by the *sender* in
//   notify(), which maps the receiving domain's page. A stalled domain's notifications set
//   `held` instead of the eventfd; the broker delivers held ones when it unstalls.
//
// Every field is accessed through std::atomic_ref. The page is writable by its users: it is
// simulation plumbing, not a security boundary (a hostile process could edit its peers'
// fault counters, nothing more).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace unetback::hv::sim {

/// Ports per domain: Xen's 2-level ABI limit on 64-bit guests.
inline constexpr std::uint32_t kMaxPortsPerDomain = 4096;
inline constexpr std::uint32_t kControlMagic = 0x4c544358;  // "XCTL"

struct PortControl {
  std::uint32_t drop;      // notifications still to lose
  std::uint32_t held;      // 1: a notification is held while the domain is stalled
  std::uint32_t bind_gen;  // changes with every binding change of the port
  std::uint32_t reserved;
};

struct DomainControl {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t dead;
  std::uint32_t stalled;
  std::uint32_t reserved[12];
  PortControl ports[kMaxPortsPerDomain];
};

inline constexpr std::size_t kDomainControlSize = (sizeof(DomainControl) + 4095) / 4096 * 4096;

/// An atomic view of one field of a shared page.
[[nodiscard]] inline std::atomic_ref<std::uint32_t> shared_u32(std::uint32_t& field) {
  return std::atomic_ref<std::uint32_t>(field);
}

}  // namespace unetback::hv::sim
