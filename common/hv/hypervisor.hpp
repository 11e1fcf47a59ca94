// Hypervisor: the bundle a main() picks (real Xen or xensim) and hands down by reference.
// Nothing below main chooses an implementation (no singletons, no globals).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/hv/event_channel.hpp"
#include "common/hv/grant_sharer.hpp"
#include "common/hv/grant_table.hpp"
#include "common/hv/hypervisor_spec.hpp"
#include "common/hv/xenstore.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hv {

/// What the caller needs from the hypervisor: a backend maps and copies other domains'
/// grants, a frontend grants its own pages. Each role opens only the devices it needs.
enum class Role : std::uint8_t { backend, frontend };

struct HypervisorOptions {
  Role role = Role::backend;
  /// Segments per grant-copy call (the batch a GrantTable::copy is split into).
  std::size_t copy_batch = 64;
  /// xensim only: register as this domain (already created by the toolstack); unset
  /// means dom0 for a backend, a fresh domain for a frontend.
  std::optional<DomId> domid;
  /// xensim only: the domain name for a fresh domain.
  std::string name;
};

class Hypervisor {
 public:
  virtual ~Hypervisor() = default;

  /// Our own domain id.
  [[nodiscard]] virtual DomId self() const = 0;
  /// The grant table (backend role). Throws SetupError for a frontend-only handle.
  virtual GrantTable& grant_table() = 0;
  /// Another grant-table handle of the backend role, for one more event-loop thread
  /// (GrantTable::copy is not reentrant: each thread that copies gets its own).
  virtual std::unique_ptr<GrantTable> open_grant_table() = 0;
  /// Our own grants (frontend role). Throws SetupError for a backend-only handle.
  virtual GrantSharer& grant_sharer() = 0;
  /// A new event-channel handle (one per event loop thread).
  virtual std::unique_ptr<EventChannel> open_event_channel() = 0;
  /// A new xenstore connection.
  virtual std::unique_ptr<XenStore> open_xenstore() = 0;
  /// Whether `domid` exists (and is not dying). After restrict_to_domain() nothing is asked:
  /// true for the domain served, false for any other.
  [[nodiscard]] virtual bool domain_exists(DomId domid) = 0;

  /// From now on, for good, this handle serves domain `serve` alone, as a deprivileged
  /// backend process does: the event channels opened after this call bind only to `serve`
  /// (Xen: IOCTL_EVTCHN_RESTRICT_DOMID on each; binding an unbound port or to another domain
  /// fails with EACCES), and the toolstack's view is closed (Xen: xenctrl/privcmd and the
  /// xenstore fallback of domain_exists; xensim: its toolstack operations fail with EPERM).
  /// Grant copies and maps are not restricted: Linux's gntdev lets its holder reach any grant
  /// issued to this domain, and so does xensim. Call it before opening any event channel:
  /// EBUSY if one was opened already, EINVAL for dom0 or a reserved domid, EACCES if the
  /// handle is restricted already.
  virtual std::error_code restrict_to_domain(DomId serve) = 0;
};

/// Opens real Xen (through libxen*) or a xensim world. Throws SetupError with a message naming
/// what is missing.
std::unique_ptr<Hypervisor> open_hypervisor(const HypervisorSpec& spec,
                                            const HypervisorOptions& opts);
/// The same for the text "xen" or "sim:<world-dir>"; anything else is a SetupError naming
/// both choices.
std::unique_ptr<Hypervisor> open_hypervisor(std::string_view spec, const HypervisorOptions& opts);

}  // namespace unetback::hv
