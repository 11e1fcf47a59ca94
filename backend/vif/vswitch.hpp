// VSwitch: unetbackd's internal L2 switch (a vif whose B:bridge is "unetback:<name>").
//
// Guest A's TX packets go straight to guest B's RX queue without the kernel: the switch learns
// source MACs (MacTable, with ageing), forwards a known unicast destination to its vif, and
// floods broadcast, multicast and unknown destinations to every other vif and to the optional
// uplink TAP (the switch's port to the host); a vif whose guest asked for multicast control
// gets only the groups it added (its McastFilter). A unicast packet to a guest normally travels as
// the sender's grant refs: B's RX path copies it with one grant copy from A's granted pages to
// B's posted buffers, while A's TX slots stay unanswered (zerocopy, under A's PendingLimiter);
// everything else is copied into backend memory first (TxPath decides, per packet).
//
// Threads: each vif queue runs on its own event-loop thread; the switch is shared. Packets and
// completions cross threads through a QueueLink per queue (a locked inbox drained on the
// queue's thread), so nothing but the link is ever touched from another queue's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <sys/uio.h>
#include <thread>
#include <vector>

#include "backend/vif/flow_hash.hpp"
#include "backend/vif/mac_table.hpp"
#include "backend/vif/mcast_filter.hpp"
#include "backend/vif/queue_link.hpp"
#include "backend/vif/switch_buffers.hpp"
#include "common/net/tap_device.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/util/strong_id.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::vif {

/// A vif on a switch.
struct SwitchPort {
  DomId dom{};
  DevId dev{};
  net::FrontendOffloads offloads{};  // what its frontend takes on guest RX
  std::vector<std::shared_ptr<QueueLink>> queues;
};

/// One packet of a pass to route (VSwitch::route_pass); `skip`: already answered.
struct RouteQuery {
  net::MacAddress src, dst;
  bool skip = false;
};

class VSwitch {
 public:
  using Clock = std::chrono::steady_clock;
  /// The uplink's port id; vifs get ids from 1.
  static constexpr SwitchPortId kUplinkPort = 0;

  struct Route {
    std::vector<std::shared_ptr<const SwitchPort>> guests;
    /// Ports a flooded group was not sent to: their guest's multicast filter refuses it.
    std::vector<std::shared_ptr<const SwitchPort>> filtered;
    bool uplink = false;
    bool flooded = false;
    void clear() {
      guests.clear();
      filtered.clear();
      uplink = false;
      flooded = false;
    }
    /// Counts the frame dropped by each filtered port's multicast filter, at the queue `hash`
    /// would have taken it to (rx_dropped_mcast_filter, as a frame from its TAP). Any thread.
    void count_filtered(std::uint32_t hash) const;
  };

  struct Stats {
    std::uint64_t forwarded = 0;  // packets routed to exactly one port
    std::uint64_t flooded = 0;
    std::uint64_t dropped_same_port = 0;  // destination on the sender's own port
    std::uint64_t not_learnt = 0;         // MAC table full
    std::uint64_t uplink_tx = 0, uplink_rx = 0, uplink_errors = 0;
    std::uint64_t routed = 0;       // packets routed (route() and route_pass())
    std::uint64_t route_locks = 0;  // acquisitions of the switch's lock for them
  };

  explicit VSwitch(std::string name);
  ~VSwitch();
  VSwitch(const VSwitch&) = delete;
  VSwitch& operator=(const VSwitch&) = delete;

  /// Creates the uplink TAP `tap_name` (vnet_hdr, plain frames from the host) and starts its
  /// reader thread. Frames the host sends into it are switched like a guest's.
  std::error_code attach_uplink(const std::string& tap_name);

  SwitchPortId add_port(std::shared_ptr<const SwitchPort> port);
  void remove_port(SwitchPortId id);
  /// The guest-RX multicast filter of port `id`'s vif (request-multicast-control, amended by
  /// its MCAST_ADD/DEL extras): a flooded multicast group goes to that port only if the filter
  /// takes it, as the vif's TAP frames are filtered. Kept until the port is removed; null, or a
  /// port that is not there, keeps none.
  void set_rx_filter(SwitchPortId id, std::shared_ptr<const McastFilter> filter);

  /// Learns `src` on `from`, then fills `out`: the destination's port if `dst` is known (none
  /// when that is `from` itself), else every other port whose multicast filter takes `dst`
  /// (the others in out.filtered) and the uplink.
  void route(SwitchPortId from, const net::MacAddress& src, const net::MacAddress& dst,
             Clock::time_point now, Route& out);
  /// route() for each query of a pass (out[i] for queries[i]; a skipped one is left empty),
  /// under one acquisition of the switch's lock instead of one per packet.
  void route_pass(SwitchPortId from, std::span<const RouteQuery> queries, Clock::time_point now,
                  std::span<Route> out);

  /// Writes one frame to the uplink TAP (any thread; false without an uplink or on error).
  bool send_uplink(const net::VirtioNetHdr& hdr, std::span<const iovec> frame);

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] Stats stats() const;
  [[nodiscard]] std::size_t ports() const;

 private:
  void route_locked(SwitchPortId from, const net::MacAddress& src, const net::MacAddress& dst,
                    Clock::time_point now, Route& out);
  void uplink_loop();
  void uplink_frame(std::span<std::byte> frame, const net::VirtioNetHdr& vh);

  std::string name_;
  mutable std::mutex mu_;
  MacTable macs_;
  std::map<SwitchPortId, std::shared_ptr<const SwitchPort>> ports_;
  std::map<SwitchPortId, std::shared_ptr<const McastFilter>> rx_filters_;
  SwitchPortId next_id_ = 1;
  Stats stats_;
  std::optional<net::TapDevice> uplink_;
  UniqueFd stop_fd_;  // eventfd: ends the uplink thread
  std::thread uplink_thread_;
  Route uplink_route_;  // the uplink thread's own
  std::shared_ptr<SwitchBuffers> uplink_buffers_ = std::make_shared<SwitchBuffers>();
};

}  // namespace unetback::vif
