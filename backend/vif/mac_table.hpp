// MacTable: the forwarding database of unetbackd's internal switch (a learning bridge, like the
// Linux bridge's fdb): source MACs are learnt per port with a timestamp, a destination is looked
// up among entries younger than the ageing time, and a port that leaves forgets its entries.
//
// A guest chooses its source MACs, so the table is bounded: beyond `capacity` entries an
// unknown source is not learnt (its replies are flooded instead; nothing is evicted, so a
// guest cycling through MACs cannot push the other guests out). Pure: no clock of its own, no
// locking (the switch locks).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "common/net/frame.hpp"

namespace unetback::vif {

using SwitchPortId = std::uint32_t;

class MacTable {
 public:
  using Clock = std::chrono::steady_clock;

  /// The Linux bridge's default ageing time.
  static constexpr std::chrono::seconds kDefaultAgeing{300};
  static constexpr std::size_t kDefaultCapacity = 4096;

  explicit MacTable(std::chrono::steady_clock::duration ageing = kDefaultAgeing,
                    std::size_t capacity = kDefaultCapacity)
      : ageing_(ageing), capacity_(capacity) {}

  /// `mac` was seen as a source on `port`. Multicast and zero sources are never learnt.
  /// Returns false when the table was full (the entry is not learnt).
  bool learn(const net::MacAddress& mac, SwitchPortId port, Clock::time_point now);
  /// The port `mac` was last seen on, unless that is older than the ageing time.
  [[nodiscard]] std::optional<SwitchPortId> lookup(const net::MacAddress& mac,
                                                   Clock::time_point now) const;
  /// Drops every entry of `port` (it left the switch).
  void forget_port(SwitchPortId port);
  /// Drops aged entries (called now and then; lookup() ignores them anyway).
  void expire(Clock::time_point now);

  [[nodiscard]] std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    SwitchPortId port;
    Clock::time_point seen;
  };
  struct MacHash {
    std::size_t operator()(const net::MacAddress& m) const noexcept {
      std::uint64_t v = 0;
      for (const auto o : m.octets) v = (v << 8) | o;
      return std::hash<std::uint64_t>{}(v);
    }
  };

  Clock::duration ageing_;
  std::size_t capacity_;
  std::unordered_map<net::MacAddress, Entry, MacHash> entries_;
};

}  // namespace unetback::vif
