#include "tools/xensim/xenstore/watches.hpp"

#include <algorithm>
#include <cerrno>

#include "common/util/result.hpp"
#include "common/wire/xs_wire.hpp"
#include "tools/xensim/xenstore/path.hpp"

namespace unetback::xensim {

std::error_code WatchRegistry::add(ConnId conn, DomId dom, std::string path, std::string token,
                                   std::optional<std::string> relative_base, std::uint32_t limit) {
  for (const auto& w : watches_)
    if (w.conn == conn && w.path == path && w.token == token) return errno_code(EEXIST);
  if (!is_privileged(dom) && count_for(dom) >= limit) return errno_code(E2BIG);
  watches_.push_back(Watch{conn, dom, std::move(path), std::move(token), std::move(relative_base)});
  return {};
}

bool WatchRegistry::remove(ConnId conn, std::string_view path, std::string_view token) {
  auto it = std::find_if(watches_.begin(), watches_.end(), [&](const Watch& w) {
    return w.conn == conn && w.path == path && w.token == token;
  });
  if (it == watches_.end()) return false;
  watches_.erase(it);
  return true;
}

void WatchRegistry::remove_connection(ConnId conn) {
  std::erase_if(watches_, [&](const Watch& w) { return w.conn == conn; });
}

std::size_t WatchRegistry::count_for(DomId dom) const {
  return static_cast<std::size_t>(std::count_if(watches_.begin(), watches_.end(),
                                                [&](const Watch& w) { return w.dom == dom; }));
}

std::optional<WatchEvent> WatchRegistry::make_event(const Watch& w, std::string_view path) {
  std::string_view shown = path;
  if (w.relative_base && shown.starts_with(*w.relative_base)) {
    shown.remove_prefix(w.relative_base->size());
    if (shown.starts_with('/')) shown.remove_prefix(1);
  }
  WatchEvent ev{w.conn, {}};
  ev.payload.reserve(shown.size() + w.token.size() + 2);
  ev.payload.append(shown);
  ev.payload += '\0';
  ev.payload += w.token;
  ev.payload += '\0';
  // Xen: "Don't try to send over-long events."
  if (ev.payload.size() > wire::kXsPayloadMax) return std::nullopt;
  return ev;
}

std::optional<WatchEvent> WatchRegistry::initial_event(ConnId conn, std::string_view path,
                                                       std::string_view token) const {
  for (const auto& w : watches_)
    if (w.conn == conn && w.path == path && w.token == token) return make_event(w, w.path);
  return std::nullopt;
}

std::vector<WatchEvent> WatchRegistry::match(const NodeChange& change) const {
  std::vector<WatchEvent> out;
  for (const auto& w : watches_) {
    if (w.path.starts_with('@')) continue;
    const bool above = is_child_or_self(change.path, w.path);
    const bool below = change.removal && !above && is_child_or_self(w.path, change.path);
    if (!above && !below) continue;

    bool visible = is_privileged(w.dom);
    for (const auto& perms : change.readers)
      visible = visible || (access_for(w.dom, perms) & kAccessRead) != 0;
    if (!visible && below) {
      // The watched node itself (or its nearest removed ancestor) decides, as it would have
      // for a change of that node.
      std::string_view p = w.path;
      for (;;) {
        auto it = std::find_if(change.removed.begin(), change.removed.end(),
                               [&](const auto& r) { return r.first == p; });
        if (it != change.removed.end()) {
          visible = (access_for(w.dom, it->second) & kAccessRead) != 0;
          break;
        }
        if (p == change.path || p == "/") break;
        p = parent_path(p);
      }
    }
    if (!visible) continue;
    if (auto ev = make_event(w, below ? std::string_view(w.path) : std::string_view(change.path)))
      out.push_back(std::move(*ev));
  }
  return out;
}

std::vector<WatchEvent> WatchRegistry::match_special(std::string_view name,
                                                     const Perms& perms) const {
  std::vector<WatchEvent> out;
  for (const auto& w : watches_) {
    if (w.path != name) continue;
    if ((access_for(w.dom, perms) & kAccessRead) == 0) continue;
    if (auto ev = make_event(w, name)) out.push_back(std::move(*ev));
  }
  return out;
}

}  // namespace unetback::xensim
