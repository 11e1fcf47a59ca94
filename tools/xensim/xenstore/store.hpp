// The xenstore node tree: values, permissions, generation counts, transactions and quotas.
// Pure data structure, no I/O: every operation takes the calling domain (for Xen's
// permission checks) and a transaction id, and reports the changes watches must see.
//
// Transactions follow Xen's rule (xenstored_transaction.c): the first access to a node inside
// a transaction copies it (or its absence) and records its generation; later accesses use the
// copy. Commit fails with EAGAIN if any node the transaction read or wrote has a different
// generation in the store by then; otherwise the modified copies replace the store's nodes.
// Changes made in a transaction are reported only at commit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "common/hv/xenstore.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "tools/xensim/xenstore/access.hpp"
#include "tools/xensim/xenstore/limits.hpp"

namespace unetback::xensim {

/// One change that watches may fire for.
struct NodeChange {
  /// The node written, created, removed or re-permissioned (absolute).
  std::string path;
  /// Permission lists any of which lets a watcher see the event: Xen delivers an event when
  /// the watcher may read the node (before or after the change) or its parent.
  std::vector<Perms> readers;
  /// RM only: every removed node with its permissions, so a watch registered below `path`
  /// (an existing or a missing descendant) fires too, with its own path.
  bool removal = false;
  std::vector<std::pair<std::string, Perms>> removed;
};
using Changes = std::vector<NodeChange>;

/// The children of a node and its generation count (DIRECTORY_PART's <gencnt>).
struct Listing {
  std::vector<std::string> children;
  std::uint64_t generation = 0;
};

class Store {
 public:
  explicit Store(const XenstoreLimits& limits = {});

  // Paths are canonical (absolute); a malformed path gives EINVAL. `tx` {} means no
  // transaction; an unknown transaction gives ENOENT. Changes are appended to `out`
  // (or kept until commit inside a transaction).
  Result<std::string> read(DomId caller, hv::XsTx tx, std::string_view path);
  std::error_code write(DomId caller, hv::XsTx tx, std::string_view path, std::string_view value,
                        Changes& out);
  std::error_code mkdir(DomId caller, hv::XsTx tx, std::string_view path, Changes& out);
  /// Removes a node and its subtree. A missing node is fine if its parent exists (Xen).
  std::error_code rm(DomId caller, hv::XsTx tx, std::string_view path, Changes& out);
  Result<Listing> list(DomId caller, hv::XsTx tx, std::string_view path);
  Result<Perms> get_perms(DomId caller, hv::XsTx tx, std::string_view path);
  /// Needs ownership (or dom0). A domU may not hand a node to another owner (EPERM).
  std::error_code set_perms(DomId caller, hv::XsTx tx, std::string_view path, Perms perms,
                            Changes& out);

  /// Starts a transaction for `caller`; ENOSPC beyond the domain's transaction limit.
  Result<hv::XsTx> transaction_start(DomId caller);
  /// Commits (EAGAIN on conflict) or aborts. Either way the transaction is gone afterwards.
  std::error_code transaction_end(hv::XsTx tx, bool commit, Changes& out);
  /// Aborts a transaction if it exists (its connection went away).
  void transaction_drop(hv::XsTx tx);
  [[nodiscard]] bool has_transaction(hv::XsTx tx) const { return txs_.contains(tx.id); }
  [[nodiscard]] std::size_t transactions_of(DomId dom) const;

  /// Nodes owned by `dom` in the committed store (the quota count).
  [[nodiscard]] std::size_t nodes_owned_by(DomId dom) const;
  [[nodiscard]] std::size_t node_count() const { return nodes_.size(); }

 private:
  struct Node {
    std::string value;
    Perms perms;
    std::vector<std::string> children;  // in creation order, as Xen lists them
    std::uint64_t generation = 0;
  };
  struct Accessed {
    std::optional<Node> node;  // the transaction's copy; nullopt: absent
    std::uint64_t seen = 0;    // generation at first access; kAbsent if it did not exist
    bool modified = false;
  };
  struct Tx {
    DomId owner;
    std::map<std::string, Accessed> accessed;
    Changes pending;
    std::unordered_map<DomId, long> owned_delta;
  };
  class View;
  friend class View;

  static constexpr std::uint64_t kAbsent = 0;

  Result<Tx*> find_tx(hv::XsTx tx);
  std::error_code create(View& v, DomId caller, const std::string& path, std::string_view value);
  [[nodiscard]] bool entry_too_big(DomId caller, const Node& n) const;

  XenstoreLimits limits_;
  std::unordered_map<std::string, Node> nodes_;
  std::unordered_map<DomId, std::size_t> owned_;
  std::map<std::uint32_t, Tx> txs_;
  std::uint64_t next_generation_ = 1;
  std::uint32_t next_tx_ = 1;
};

}  // namespace unetback::xensim
