// WatchEventQueue: the watch events a XenStore connection has received and not yet handed out,
// at most one per (token, path), in the order each first arrived.
//
// XSA-349 (CVE-2020-29568): a guest that rewrites a node the backend watches (its own
// F:state, say) in a loop makes dom0 queue watch events without bound. Linux's fix lets a
// watch discard an event while one is still pending for it (`xenbus_watch.will_handle` with a
// per-watch `nr_pending` count), which the backend bus does for the other end's state watch;
// FreeBSD's gives a watch a `max_pending` of one for the same node. Every consumer here
// re-reads the node when an event arrives (level-triggered), so an event identical to one
// still pending carries no news: it is merged into that one.
//
// Watches are recursive, so merging by node alone is not enough: a guest that makes and
// removes fresh child names under a node dom0 watches (its own F:state) fires one distinct
// event per name. A watch therefore holds at most kMaxPendingPerWatch pending events; past
// that, its pending events become one event at the watched node itself (the node add_watch()
// named), which every handler takes as "read everything under it again", and every later
// event of that watch merges into it until it is handed out. Memory is bounded by the number
// of watches, whatever a guest writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/hv/xenstore.hpp"

namespace unetback::hv {

class WatchEventQueue {
 public:
  /// Pending events one watch may hold before they become one event at its node.
  static constexpr std::size_t kMaxPendingPerWatch = 16;

  /// The node of the watch `token` (what collapsed events name); the last call wins.
  void add_watch(std::string_view path, std::string_view token);
  /// Queues `ev` unless the same (token, path) is pending already, or its watch is collapsed
  /// into one pending event; true if it was queued.
  bool push(XsWatchEvent ev);
  /// The oldest pending event, or nullopt.
  std::optional<XsWatchEvent> pop();
  /// Drops the pending events of the watch (path, token): those with that token whose path
  /// is `path` or below it (libxenstore's XS_UNWATCH_FILTER rule), so that no event arrives
  /// for a watch that is gone.
  void remove_watch(std::string_view path, std::string_view token);

  [[nodiscard]] std::size_t size() const { return order_.size(); }
  [[nodiscard]] bool empty() const { return order_.empty(); }
  /// Events merged into a pending one since construction.
  [[nodiscard]] std::uint64_t merged() const { return merged_; }
  /// Times a watch's pending events became one event at its node.
  [[nodiscard]] std::uint64_t collapsed() const { return collapsed_; }

 private:
  static std::string key(std::string_view token, std::string_view path);
  struct PerWatch {
    std::size_t pending = 0;  // events of this token in order_
    bool collapsed = false;   // its one pending event is at the watched node
  };
  void collapse(const std::string& token);

  std::deque<XsWatchEvent> order_;
  std::unordered_set<std::string> pending_;                  // key() of every event in order_
  std::unordered_map<std::string, PerWatch> per_watch_;      // tokens with pending events
  std::unordered_map<std::string, std::string> watch_path_;  // token -> watched node
  std::uint64_t merged_ = 0;
  std::uint64_t collapsed_ = 0;
};

/// True if `child` is `parent` or a node below it ("/a/b" is under "/a", "/ab" is not).
[[nodiscard]] bool xs_path_is_under(std::string_view parent, std::string_view child);

}  // namespace unetback::hv
