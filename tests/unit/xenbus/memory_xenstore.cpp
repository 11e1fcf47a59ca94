#include "tests/unit/xenbus/memory_xenstore.hpp"

#include <algorithm>
#include <cerrno>

namespace unetback::testing {
namespace {

bool valid_path(std::string_view p) {
  return !p.empty() && p.front() == '/' && (p.size() == 1 || p.back() != '/') &&
         p.find("//") == std::string_view::npos;
}

// True if `path` is `ancestor` or below it.
bool is_within(std::string_view path, std::string_view ancestor) {
  if (ancestor == "/") return true;
  return path.substr(0, ancestor.size()) == ancestor &&
         (path.size() == ancestor.size() || path[ancestor.size()] == '/');
}

}  // namespace

Result<std::string> MemoryXenStore::read(std::string_view path, hv::XsTx) {
  ++reads_;
  if (!valid_path(path)) return std::errc::invalid_argument;
  auto it = nodes_.find(std::string(path));
  if (it == nodes_.end()) return std::errc::no_such_file_or_directory;
  return it->second;
}

void MemoryXenStore::create_parents(const std::string& path) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    nodes_.try_emplace(path.substr(0, at), "");
}

std::error_code MemoryXenStore::write(std::string_view path, std::string_view value, hv::XsTx) {
  if (!valid_path(path)) return std::make_error_code(std::errc::invalid_argument);
  const std::string p(path);
  create_parents(p);
  nodes_[p] = std::string(value);
  if (journal_ != nullptr) journal_->push_back("write " + p + "=" + std::string(value));
  fire(p, false);
  return {};
}

std::error_code MemoryXenStore::mkdir(std::string_view path, hv::XsTx) {
  if (!valid_path(path)) return std::make_error_code(std::errc::invalid_argument);
  const std::string p(path);
  if (nodes_.count(p) != 0) return {};
  create_parents(p);
  nodes_[p] = "";
  fire(p, false);
  return {};
}

std::error_code MemoryXenStore::rm(std::string_view path, hv::XsTx) {
  if (!valid_path(path) || path == "/") return std::make_error_code(std::errc::invalid_argument);
  const std::string p(path);
  if (nodes_.count(p) == 0) return std::make_error_code(std::errc::no_such_file_or_directory);
  for (auto it = nodes_.lower_bound(p); it != nodes_.end() && is_within(it->first, p);)
    it = nodes_.erase(it);
  if (journal_ != nullptr) journal_->push_back("rm " + p);
  fire(p, true);
  return {};
}

Result<std::vector<std::string>> MemoryXenStore::directory(std::string_view path, hv::XsTx) {
  if (!valid_path(path)) return std::errc::invalid_argument;
  const std::string p(path);
  if (nodes_.count(p) == 0) return std::errc::no_such_file_or_directory;
  const std::string prefix = p == "/" ? "/" : p + "/";
  std::vector<std::string> children;
  for (auto it = nodes_.upper_bound(p); it != nodes_.end() && is_within(it->first, p); ++it) {
    const std::string rest = it->first.substr(prefix.size());
    if (rest.find('/') == std::string::npos) children.push_back(rest);
  }
  return children;
}

Result<std::vector<hv::XsPerm>> MemoryXenStore::get_perms(std::string_view path, hv::XsTx) {
  const std::string p(path);
  if (nodes_.count(p) == 0) return std::errc::no_such_file_or_directory;
  auto it = perms_.find(p);
  if (it == perms_.end()) return std::vector<hv::XsPerm>{{kDom0, hv::XsPerm::Kind::none}};
  return it->second;
}

std::error_code MemoryXenStore::set_perms(std::string_view path, std::span<const hv::XsPerm> perms,
                                          hv::XsTx) {
  const std::string p(path);
  if (nodes_.count(p) == 0) return std::make_error_code(std::errc::no_such_file_or_directory);
  if (perms.empty()) return std::make_error_code(std::errc::invalid_argument);
  perms_[p] = std::vector<hv::XsPerm>(perms.begin(), perms.end());
  return {};
}

Result<hv::XsTx> MemoryXenStore::transaction_start() {
  open_tx_.push_back(next_tx_);
  return hv::XsTx{next_tx_++};
}

std::error_code MemoryXenStore::transaction_end(hv::XsTx tx, bool commit) {
  auto it = std::find(open_tx_.begin(), open_tx_.end(), tx.id);
  if (it == open_tx_.end()) return std::make_error_code(std::errc::invalid_argument);
  open_tx_.erase(it);
  if (!commit) return {};
  if (failing_commits_ > 0) {
    --failing_commits_;
    return std::make_error_code(std::errc::resource_unavailable_try_again);
  }
  ++commits_;
  return {};
}

std::error_code MemoryXenStore::watch(std::string_view path, std::string_view token) {
  if (!valid_path(path)) return std::make_error_code(std::errc::invalid_argument);
  for (const Watch& w : watches_)
    if (w.path == path && w.token == token) return std::make_error_code(std::errc::file_exists);
  watches_.push_back({std::string(path), std::string(token)});
  // xenstored fires every new watch once, with the watched path.
  events_.push_back({std::string(path), std::string(token)});
  return {};
}

std::error_code MemoryXenStore::unwatch(std::string_view path, std::string_view token) {
  auto it = std::find_if(watches_.begin(), watches_.end(),
                         [&](const Watch& w) { return w.path == path && w.token == token; });
  if (it == watches_.end()) return std::make_error_code(std::errc::no_such_file_or_directory);
  watches_.erase(it);
  // Like libxenstore's xs_unwatch: events of that watch still queued are dropped.
  std::erase_if(events_, [&](const hv::XsWatchEvent& e) {
    return e.token == token && is_within(e.path, path);
  });
  return {};
}

std::optional<hv::XsWatchEvent> MemoryXenStore::read_watch() {
  if (events_.empty()) return std::nullopt;
  hv::XsWatchEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

Result<std::string> MemoryXenStore::get_domain_path(DomId domid) {
  return "/local/domain/" + std::to_string(domid.value());
}

bool MemoryXenStore::exists(std::string_view path) const {
  return nodes_.count(std::string(path)) != 0;
}

void MemoryXenStore::fire(const std::string& path, bool removal) {
  for (const Watch& w : watches_) {
    if (is_within(path, w.path)) {
      events_.push_back({path, w.token});
    } else if (removal && is_within(w.path, path)) {
      // xenstored: removing a node also fires the watches set below it, with their own path.
      events_.push_back({w.path, w.token});
    }
  }
}

}  // namespace unetback::testing
