#include "backend/vif/mac_table.hpp"

#include <iterator>

namespace unetback::vif {

bool MacTable::learn(const net::MacAddress& mac, SwitchPortId port, Clock::time_point now) {
  if (mac.is_multicast() || mac.is_zero()) return true;
  if (auto it = entries_.find(mac); it != entries_.end()) {
    // A MAC that moved (a guest migrated, or spoofs another) follows its latest port, as the
    // Linux bridge does.
    it->second = Entry{port, now};
    return true;
  }
  if (entries_.size() >= capacity_) {
    expire(now);
    if (entries_.size() >= capacity_) return false;
  }
  entries_.emplace(mac, Entry{port, now});
  return true;
}

std::optional<SwitchPortId> MacTable::lookup(const net::MacAddress& mac,
                                             Clock::time_point now) const {
  const auto it = entries_.find(mac);
  if (it == entries_.end() || now - it->second.seen > ageing_) return std::nullopt;
  return it->second.port;
}

void MacTable::forget_port(SwitchPortId port) {
  std::erase_if(entries_, [port](const auto& kv) { return kv.second.port == port; });
}

void MacTable::expire(Clock::time_point now) {
  std::erase_if(entries_, [&](const auto& kv) { return now - kv.second.seen > ageing_; });
}

}  // namespace unetback::vif
