// WatchEventQueue: the watch events a XenStore connection has received and not yet handed out,
// at most one per (token, path), in the order each first arrived.
//
// XSA-349 (CVE-2020-29568): a guest that rewrites a node the backend watches (its own
// F:state, say) in a loop makes dom0 queue watch events without bound. Linux's fix lets a
// watch discard an event while one is still pending for it (`xenbus_watch.will_handle` with a
// per-watch `nr_pending` count), which the backend bus does for the other end's state watch;
// FreeBSD's gives a watch a `max_pending` of one for the same node. Every consumer here
// re-reads the node when an event arrives (level-triggered), so an event identical to one
// still pending carries no news: it is merged into that one, and memory is bounded by the
// number of distinct nodes under the watches (which a guest's xenstore node quota bounds)
// instead of by the event rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "common/hv/xenstore.hpp"

namespace unetback::hv {

class WatchEventQueue {
 public:
  /// Queues `ev` unless the same (token, path) is pending already; true if it was queued.
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

 private:
  static std::string key(std::string_view token, std::string_view path);

  std::deque<XsWatchEvent> order_;
  std::unordered_set<std::string> pending_;  // key() of every event in order_
  std::uint64_t merged_ = 0;
};

/// True if `child` is `parent` or a node below it ("/a/b" is under "/a", "/ab" is not).
[[nodiscard]] bool xs_path_is_under(std::string_view parent, std::string_view child);

}  // namespace unetback::hv
