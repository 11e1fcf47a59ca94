// Watch registry and matching (Xen's docs/misc/xenstore.txt, WATCH / WATCH_EVENT; Xen's
// xenstored_watch.c).
//
// * A change of node P fires every watch on P or an ancestor of P, with P as the event path.
// * RM of P also fires every watch registered below P (on a removed descendant, or on a path
//   that did not exist), with the watch's own path: "if the event was the recursive removal
//   of a parent of <wpath>, <epath> is just <wpath>". Each watch fires once per change.
// * "@introduceDomain" / "@releaseDomain" fire only for their special events.
// * A watch registered with a relative path reports relative event paths.
// * An event is delivered only if the watcher may read the node (before or after the
//   change) or its parent; dom0 sees everything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/util/strong_id.hpp"
#include "tools/xensim/xenstore/access.hpp"
#include "tools/xensim/xenstore/store.hpp"

namespace unetback::xensim {

struct ConnIdTag {};
/// One client connection of the daemon (never reused while the daemon runs).
using ConnId = StrongId<ConnIdTag, std::uint64_t>;

/// A watch event ready to be sent: WATCH_EVENT payload "<epath>\0<token>\0".
struct WatchEvent {
  ConnId conn;
  std::string payload;
};

class WatchRegistry {
 public:
  /// Registers a watch. `path` is canonical (absolute or "@…"); `relative_base` is the
  /// caller's domain path when the client gave a relative path. EEXIST for a duplicate
  /// (same connection, path and token), E2BIG when the domain holds `limit` watches already
  /// (Xen's answer to quota_nb_watch_per_domain); dom0 has no limit.
  std::error_code add(ConnId conn, DomId dom, std::string path, std::string token,
                      std::optional<std::string> relative_base, std::uint32_t limit);
  /// Removes one watch; false if the connection has no such watch (ENOENT).
  bool remove(ConnId conn, std::string_view path, std::string_view token);
  void remove_connection(ConnId conn);
  [[nodiscard]] std::size_t count_for(DomId dom) const;
  [[nodiscard]] std::size_t size() const { return watches_.size(); }

  /// The event every new watch fires at once, with the watch's path as given.
  [[nodiscard]] std::optional<WatchEvent> initial_event(ConnId conn, std::string_view path,
                                                        std::string_view token) const;
  /// Events for one store change.
  [[nodiscard]] std::vector<WatchEvent> match(const NodeChange& change) const;
  /// Events for a special "@…" event, for watchers that may read `perms`.
  [[nodiscard]] std::vector<WatchEvent> match_special(std::string_view name,
                                                      const Perms& perms) const;

 private:
  struct Watch {
    ConnId conn;
    DomId dom;
    std::string path;
    std::string token;
    std::optional<std::string> relative_base;
  };
  static std::optional<WatchEvent> make_event(const Watch& w, std::string_view path);

  std::vector<Watch> watches_;  // in registration order
};

}  // namespace unetback::xensim
