// Per-domain resource limits of the xensim xenstored, with Xen's defaults (xenstored_core.c
// quota_* variables). The privileged domain (dom0) is never limited.
#pragma once

#include <cstddef>
#include <cstdint>

namespace unetback::xensim {

struct XenstoreLimits {
  /// Nodes a domain may own (Xen's quota_nb_entry_per_domain); creating more gives ENOSPC.
  std::uint32_t max_nodes_per_domain = 1000;
  /// Watches a domain may hold (quota_nb_watch_per_domain); more gives E2BIG, as in Xen.
  std::uint32_t max_watches_per_domain = 128;
  /// Transactions open at once over all of a domain's connections (quota_max_transaction
  /// is per connection in Xen; per domain is stricter). More gives ENOSPC.
  std::uint32_t max_transactions_per_domain = 10;
  /// Connections a domain may have open on its socket; more are closed at accept.
  std::uint32_t max_connections_per_domain = 64;
  /// Bytes of one node written by a domain: value plus child names (quota_max_entry_size,
  /// which also counts Xen's record header). Larger gives ENOSPC.
  std::uint32_t max_entry_size = 2048;
  /// Entries in a permission list set by a domain (quota_nb_perms_per_node); more: ENOSPC.
  std::uint32_t max_perms_per_node = 5;
  /// Messages queued for one connection of an unprivileged domain that it has not read yet.
  /// A guest that stops reading its watch events is disconnected beyond this, so it cannot
  /// grow the daemon. dom0 is exempt, as on Xen (server.hpp says why that stays bounded).
  std::uint32_t max_queued_messages_per_connection = 2048;
};

}  // namespace unetback::xensim
