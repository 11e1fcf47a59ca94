#include "tools/xensim/xenstore/store.hpp"

#include <algorithm>
#include <cerrno>
#include <functional>

#include "tools/xensim/xenstore/path.hpp"

namespace unetback::xensim {

// Where an operation reads and writes nodes: the committed store, or a transaction's copies
// (made on first access, recording the generation seen for the commit-time conflict check).
class Store::View {
 public:
  View(Store& s, Tx* tx) : s_(s), tx_(tx) {}

  // The node at `path`, or nullptr. The pointer is valid until the next put()/erase().
  const Node* get(const std::string& path) {
    if (tx_ == nullptr) {
      auto it = s_.nodes_.find(path);
      return it == s_.nodes_.end() ? nullptr : &it->second;
    }
    Accessed& a = touch(path);
    return a.node ? &*a.node : nullptr;
  }

  void put(const std::string& path, Node n) {
    n.generation = s_.next_generation_++;
    if (tx_ == nullptr) {
      auto it = s_.nodes_.find(path);
      if (it != s_.nodes_.end()) {
        --s_.owned_[it->second.perms[0].domid];
        ++s_.owned_[n.perms[0].domid];
        it->second = std::move(n);
      } else {
        ++s_.owned_[n.perms[0].domid];
        s_.nodes_.emplace(path, std::move(n));
      }
      return;
    }
    Accessed& a = touch(path);
    if (a.node) --tx_->owned_delta[a.node->perms[0].domid];
    ++tx_->owned_delta[n.perms[0].domid];
    a.node = std::move(n);
    a.modified = true;
  }

  void erase(const std::string& path) {
    if (tx_ == nullptr) {
      auto it = s_.nodes_.find(path);
      if (it == s_.nodes_.end()) return;
      --s_.owned_[it->second.perms[0].domid];
      s_.nodes_.erase(it);
      return;
    }
    Accessed& a = touch(path);
    if (!a.node) return;
    --tx_->owned_delta[a.node->perms[0].domid];
    a.node.reset();
    a.modified = true;
  }

  [[nodiscard]] long owned(DomId d) const {
    auto it = s_.owned_.find(d);
    long n = it == s_.owned_.end() ? 0 : static_cast<long>(it->second);
    if (tx_ != nullptr) {
      auto dt = tx_->owned_delta.find(d);
      if (dt != tx_->owned_delta.end()) n += dt->second;
    }
    return n;
  }

  // Xen: "Changes made in transactions cause an event only if and when committed."
  void emit(NodeChange c, Changes& out) {
    (tx_ != nullptr ? tx_->pending : out).push_back(std::move(c));
  }

 private:
  Accessed& touch(const std::string& path) {
    auto it = tx_->accessed.find(path);
    if (it == tx_->accessed.end()) {
      Accessed a;
      auto g = s_.nodes_.find(path);
      if (g != s_.nodes_.end()) {
        a.node = g->second;
        a.seen = g->second.generation;
      } else {
        a.seen = kAbsent;
      }
      it = tx_->accessed.emplace(path, std::move(a)).first;
    }
    return it->second;
  }

  Store& s_;
  Tx* tx_;
};

Store::Store(const XenstoreLimits& limits) : limits_(limits) {
  // The root and /tool/xenstored, as xenstored's setup_structure() creates them: owned by
  // dom0, no access for anyone else.
  View v(*this, nullptr);
  const Perms root_perms{hv::XsPerm{kDom0, hv::XsPerm::Kind::none}};
  v.put("/", Node{"", root_perms, {"tool"}, 0});
  v.put("/tool", Node{"", root_perms, {"xenstored"}, 0});
  v.put("/tool/xenstored", Node{"", root_perms, {}, 0});
}

Result<Store::Tx*> Store::find_tx(hv::XsTx tx) {
  if (tx.id == 0) return static_cast<Tx*>(nullptr);
  auto it = txs_.find(tx.id);
  if (it == txs_.end()) return errno_code(ENOENT);
  return &it->second;
}

bool Store::entry_too_big(DomId caller, const Node& n) const {
  if (is_privileged(caller)) return false;
  std::size_t size = n.value.size();
  for (const auto& c : n.children) size += c.size() + 1;
  return size > limits_.max_entry_size;
}

namespace {

// Xen's get_node(): the node if the caller holds `wanted` on it. Otherwise ENOENT or EACCES,
// but "we don't want the errno to indicate any information about the node": if the nearest
// existing ancestor denies the caller those rights too, the answer is EACCES.
template <typename ViewT, typename NodeT>
Result<NodeT> checked(ViewT& v, DomId caller, const std::string& path, unsigned wanted) {
  if (!is_valid_path(path)) return errno_code(EINVAL);
  const NodeT* n = v.get(path);
  if (n != nullptr && allowed(caller, n->perms, wanted)) return *n;
  const int e = n != nullptr ? EACCES : ENOENT;
  std::string p = path;
  while (p != "/") {
    p = std::string(parent_path(p));
    if (const NodeT* anc = v.get(p)) {
      if ((access_for(caller, anc->perms) & wanted) != 0) return errno_code(e);
      return errno_code(EACCES);
    }
  }
  return errno_code(e);
}

}  // namespace

std::error_code Store::create(View& v, DomId caller, const std::string& path,
                              std::string_view value) {
  // WRITE and MKDIR create missing parents with empty values (Xen's docs/misc/xenstore.txt).
  std::vector<std::string> missing;  // path first, then its missing ancestors
  std::string anchor = path;
  while (v.get(anchor) == nullptr) {
    missing.push_back(anchor);
    anchor = std::string(parent_path(anchor));
  }
  if (!is_privileged(caller) && v.owned(caller) + static_cast<long>(missing.size()) >
                                    static_cast<long>(limits_.max_nodes_per_domain))
    return errno_code(ENOSPC);

  Node parent = *v.get(anchor);
  // New nodes inherit their parent's permissions, "except unprivileged domains own what
  // they create" (xenstored construct_node()); the same holds for implicit parents.
  Perms inherited = parent.perms;
  if (!is_privileged(caller)) inherited[0].domid = caller;

  parent.children.emplace_back(base_name(missing.back()));
  if (entry_too_big(caller, parent)) return errno_code(ENOSPC);
  Node leaf{std::string(value), inherited, {}, 0};
  if (entry_too_big(caller, leaf)) return errno_code(ENOSPC);

  v.put(anchor, std::move(parent));
  for (std::size_t i = missing.size(); i-- > 1;)
    v.put(missing[i], Node{"", inherited, {std::string(base_name(missing[i - 1]))}, 0});
  v.put(path, std::move(leaf));
  return {};
}

Result<std::string> Store::read(DomId caller, hv::XsTx tx, std::string_view path) {
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  auto n = checked<View, Node>(v, caller, std::string(path), kAccessRead);
  if (!n) return n.error();
  return std::move(n->value);
}

Result<Listing> Store::list(DomId caller, hv::XsTx tx, std::string_view path) {
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  auto n = checked<View, Node>(v, caller, std::string(path), kAccessRead);
  if (!n) return n.error();
  return Listing{std::move(n->children), n->generation};
}

Result<Perms> Store::get_perms(DomId caller, hv::XsTx tx, std::string_view path) {
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  auto n = checked<View, Node>(v, caller, std::string(path), kAccessRead);
  if (!n) return n.error();
  return std::move(n->perms);
}

std::error_code Store::write(DomId caller, hv::XsTx tx, std::string_view path_in,
                             std::string_view value, Changes& out) {
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  const std::string path(path_in);
  auto n = checked<View, Node>(v, caller, path, kAccessWrite);
  if (n) {
    n->value = std::string(value);
    if (entry_too_big(caller, *n)) return errno_code(ENOSPC);
    v.put(path, std::move(*n));
  } else if (n.error() == std::errc::no_such_file_or_directory) {
    if (auto e = create(v, caller, path, value)) return e;
  } else {
    return n.error();
  }
  NodeChange c{path, {v.get(path)->perms, v.get(std::string(parent_path(path)))->perms}, false, {}};
  v.emit(std::move(c), out);
  return {};
}

std::error_code Store::mkdir(DomId caller, hv::XsTx tx, std::string_view path_in, Changes& out) {
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  const std::string path(path_in);
  auto n = checked<View, Node>(v, caller, path, kAccessWrite);
  if (n) return {};  // "If <path> or any parent already exists, its value is left unchanged."
  if (n.error() != std::errc::no_such_file_or_directory) return n.error();
  if (auto e = create(v, caller, path, "")) return e;
  NodeChange c{path, {v.get(path)->perms, v.get(std::string(parent_path(path)))->perms}, false, {}};
  v.emit(std::move(c), out);
  return {};
}

std::error_code Store::rm(DomId caller, hv::XsTx tx, std::string_view path_in, Changes& out) {
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  const std::string path(path_in);
  auto n = checked<View, Node>(v, caller, path, kAccessWrite);
  if (!n) {
    // "It is not an error if <path> does not exist, but it _is_ an error if <path>'s
    // immediate parent does not exist either."
    if (n.error() == std::errc::no_such_file_or_directory &&
        v.get(std::string(parent_path(path))) != nullptr)
      return {};
    return n.error();
  }
  if (path == "/") return errno_code(EINVAL);

  NodeChange c;
  c.path = path;
  c.removal = true;
  // Children before parents, so a subtree is never left without its root.
  std::function<void(const std::string&)> collect = [&](const std::string& p) {
    const Node node = *v.get(p);
    for (const auto& child : node.children) collect(child_path(p, child));
    c.removed.emplace_back(p, node.perms);
  };
  collect(path);
  for (const auto& [p, perms] : c.removed) v.erase(p);

  const std::string parent_name(parent_path(path));
  Node parent = *v.get(parent_name);
  const auto base = base_name(path);
  parent.children.erase(std::remove(parent.children.begin(), parent.children.end(), base),
                        parent.children.end());
  c.readers = {n->perms, parent.perms};
  v.put(parent_name, std::move(parent));
  v.emit(std::move(c), out);
  return {};
}

std::error_code Store::set_perms(DomId caller, hv::XsTx tx, std::string_view path_in, Perms perms,
                                 Changes& out) {
  if (perms.empty()) return errno_code(EINVAL);
  if (!is_privileged(caller) && perms.size() > limits_.max_perms_per_node)
    return errno_code(ENOSPC);
  auto t = find_tx(tx);
  if (!t) return t.error();
  View v(*this, *t);
  const std::string path(path_in);
  // "We must own node to do this (tools can do this too)."
  auto n = checked<View, Node>(v, caller, path, kAccessWrite | kAccessOwner);
  if (!n) return n.error();
  // "Unprivileged domains may not change the owner."
  if (!is_privileged(caller) && perms[0].domid != n->perms[0].domid) return errno_code(EPERM);
  // A watcher that loses read access still sees this change: the old list counts too.
  NodeChange c{path, {n->perms, perms}, false, {}};
  n->perms = std::move(perms);
  v.put(path, std::move(*n));
  if (path != "/") c.readers.push_back(v.get(std::string(parent_path(path)))->perms);
  v.emit(std::move(c), out);
  return {};
}

Result<hv::XsTx> Store::transaction_start(DomId caller) {
  if (!is_privileged(caller) && transactions_of(caller) >= limits_.max_transactions_per_domain)
    return errno_code(ENOSPC);
  while (next_tx_ == 0 || txs_.contains(next_tx_)) ++next_tx_;
  const std::uint32_t id = next_tx_++;
  txs_.emplace(id, Tx{caller, {}, {}, {}});
  return hv::XsTx{id};
}

std::error_code Store::transaction_end(hv::XsTx tx, bool commit, Changes& out) {
  auto it = txs_.find(tx.id);
  if (tx.id == 0 || it == txs_.end()) return errno_code(ENOENT);
  Tx t = std::move(it->second);
  txs_.erase(it);
  if (!commit) return {};

  for (const auto& [path, a] : t.accessed) {
    auto g = nodes_.find(path);
    const std::uint64_t now = g == nodes_.end() ? kAbsent : g->second.generation;
    if (now != a.seen) return errno_code(EAGAIN);
  }
  View v(*this, nullptr);
  for (auto& [path, a] : t.accessed) {
    if (!a.modified) continue;
    if (a.node) {
      v.put(path, std::move(*a.node));
    } else {
      v.erase(path);
    }
  }
  for (auto& c : t.pending) out.push_back(std::move(c));
  return {};
}

void Store::transaction_drop(hv::XsTx tx) {
  txs_.erase(tx.id);
}

std::size_t Store::transactions_of(DomId dom) const {
  return static_cast<std::size_t>(std::count_if(
      txs_.begin(), txs_.end(), [&](const auto& kv) { return kv.second.owner == dom; }));
}

std::size_t Store::nodes_owned_by(DomId dom) const {
  auto it = owned_.find(dom);
  return it == owned_.end() ? 0 : it->second;
}

}  // namespace unetback::xensim
