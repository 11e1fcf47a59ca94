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

bool WatchEventQueue::push(XsWatchEvent ev) {
  if (!pending_.insert(key(ev.token, ev.path)).second) {
    ++merged_;
    return false;
  }
  order_.push_back(std::move(ev));
  return true;
}

std::optional<XsWatchEvent> WatchEventQueue::pop() {
  if (order_.empty()) return std::nullopt;
  XsWatchEvent ev = std::move(order_.front());
  order_.pop_front();
  pending_.erase(key(ev.token, ev.path));
  return ev;
}

void WatchEventQueue::remove_watch(std::string_view path, std::string_view token) {
  std::erase_if(order_, [&](const XsWatchEvent& ev) {
    if (ev.token != token || !xs_path_is_under(path, ev.path)) return false;
    pending_.erase(key(ev.token, ev.path));
    return true;
  });
}

}  // namespace unetback::hv
