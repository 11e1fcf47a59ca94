#include "common/hv/watch_event_queue.hpp"

#include <algorithm>
#include <utility>

namespace unetback::hv {

bool xs_path_is_under(std::string_view parent, std::string_view child) {
  if (!child.starts_with(parent)) return false;
  return child.size() == parent.size() || child[parent.size()] == '/';
}

std::string WatchEventQueue::key(std::string_view token, std::string_view path) {
  // Neither a token nor a path holds a NUL (the wire format separates them with one).
  std::string k;
  k.reserve(token.size() + 1 + path.size());
  k.append(token);
  k.push_back('\0');
  k.append(path);
  return k;
}

void WatchEventQueue::add_watch(std::string_view path, std::string_view token) {
  watch_path_.insert_or_assign(std::string(token), std::string(path));
}

bool WatchEventQueue::push(XsWatchEvent ev) {
  PerWatch& w = per_watch_[ev.token];
  if (w.collapsed || pending_.contains(key(ev.token, ev.path))) {
    ++merged_;
    return false;
  }
  if (w.pending >= kMaxPendingPerWatch) {
    collapse(ev.token);
    ++merged_;
    return false;
  }
  pending_.insert(key(ev.token, ev.path));
  ++w.pending;
  order_.push_back(std::move(ev));
  return true;
}

void WatchEventQueue::collapse(const std::string& token) {
  // The watch's node, or (a watch this queue was not told of) its first pending event's.
  auto first = std::find_if(order_.begin(), order_.end(),
                            [&](const XsWatchEvent& ev) { return ev.token == token; });
  const auto known = watch_path_.find(token);
  std::string node = known != watch_path_.end() ? known->second : first->path;
  // One event at the first one's place in the order, the rest dropped.
  std::size_t index = static_cast<std::size_t>(first - order_.begin());
  for (std::size_t i = order_.size(); i-- > 0;) {
    if (order_[i].token != token) continue;
    pending_.erase(key(order_[i].token, order_[i].path));
    if (i != index) order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  order_[index].path = std::move(node);
  pending_.insert(key(token, order_[index].path));
  per_watch_[token] = PerWatch{1, true};
  ++collapsed_;
}

std::optional<XsWatchEvent> WatchEventQueue::pop() {
  if (order_.empty()) return std::nullopt;
  XsWatchEvent ev = std::move(order_.front());
  order_.pop_front();
  pending_.erase(key(ev.token, ev.path));
  if (auto w = per_watch_.find(ev.token); w != per_watch_.end() && --w->second.pending == 0)
    per_watch_.erase(w);
  return ev;
}

void WatchEventQueue::remove_watch(std::string_view path, std::string_view token) {
  std::erase_if(order_, [&](const XsWatchEvent& ev) {
    if (ev.token != token || !xs_path_is_under(path, ev.path)) return false;
    pending_.erase(key(ev.token, ev.path));
    if (auto w = per_watch_.find(ev.token); w != per_watch_.end() && --w->second.pending == 0)
      per_watch_.erase(w);
    return true;
  });
  if (auto w = watch_path_.find(std::string(token)); w != watch_path_.end() && w->second == path)
    watch_path_.erase(w);
}

}  // namespace unetback::hv
