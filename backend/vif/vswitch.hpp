// VSwitch: unetbackd's internal L2 switch (a vif whose B:bridge is "unetback:<name>").
//
// Guest A's TX packets go straight to guest B's RX queue without the kernel: the switch learns
// source MACs (MacTable, with ageing), forwards a known unicast destination to its vif, and
// floods broadcast, multicast and unknown destinations to every other vif and to the optional
// uplink TAP (the switch's port to the host). A unicast packet to a guest normally travels as
// the sender's grant refs: B's RX path copies it with one grant copy from A's granted pages to
// B's posted buffers, while A's TX slots stay unanswered (zerocopy, under A's PendingLimiter);
// everything else is copied into backend memory first (TxPath decides, per packet).
//
// Threads: each vif queue runs on its own event-loop thread; the switch is shared. Packets and
// completions cross threads through a QueueLink per queue (a locked inbox drained on the
// queue's thread), so nothing but the link is ever touched from another queue's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <sys/uio.h>
#include <thread>
#include <vector>

#include "backend/vif/mac_table.hpp"
#include "backend/vif/packet_pool.hpp"
#include "backend/vif/rx_path.hpp"
#include "common/net/tap_device.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/util/strong_id.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::vif {

/// One queue of a vif on a switch, as other threads reach it.
class QueueLink {
 public:
  /// A zerocopy TX packet of this queue is no longer read by anyone (its receiver copied or
  /// dropped it): answer its slots. `token` is its PendingLimiter token index.
  struct TxDone {
    std::uint16_t token = 0;
    bool delivered = false;
  };

  /// Hands a packet to this queue's RX path. Any thread. False (and `p` released at once) if
  /// the queue is not running.
  bool deliver(RxPacket&& p);
  /// Reports a completion back to the sending queue. Any thread; ignored once it stopped.
  void tx_done(TxDone d);

  /// The queue's side: `schedule` posts its drain handler onto its thread (called under the
  /// link's lock, at most once until take() ran).
  void attach(std::function<void()> schedule);
  /// After it nothing is scheduled any more; packets still in the inbox are released.
  void detach();
  /// On the queue's thread: takes the inbox (and allows the next schedule).
  void take(std::vector<RxPacket>& rx, std::vector<TxDone>& done);

  /// Any thread, no lock: true if a packet of `len` bytes would find the queue's RX backlog
  /// (its RxPath queue plus the inbox) past its byte cap, so the sender drops it before it
  /// copies or holds it, as a full netdev queue drops (seed 000). A stale read only lets one
  /// packet more or less through; the queue's own cap still holds.
  [[nodiscard]] bool full(std::uint32_t len) const;
  /// The queue's RxPath publishes its queued bytes and cap here (RxConfig::backlog).
  [[nodiscard]] std::shared_ptr<RxBacklog> backlog(const std::shared_ptr<QueueLink>& self) {
    return {self, &backlog_};
  }

 private:
  RxBacklog backlog_;
  std::atomic<std::uint32_t> inbox_bytes_{0};  // written under mu_, read by full()
  std::mutex mu_;
  std::function<void()> schedule_;
  bool scheduled_ = false;
  std::vector<RxPacket> rx_;
  std::vector<TxDone> done_;
};

/// Backend-memory copies of switched packets, recycled: one owner thread (a sender queue, the
/// uplink thread) takes buffers; each receiver of a packet holds a reference and drops it from
/// its own thread when its copy is done, without a lock (the last one pushes the buffer onto
/// a lock-free return stack the owner takes whole). Replaces a new[] and a shared_ptr control
/// block per copied packet. The buffers are one PacketPool mapping: untouched pages cost nothing.
class SwitchBuffers {
 public:
  static constexpr std::size_t kDefaultCount = 256;
  explicit SwitchBuffers(std::size_t count = kDefaultCount);

  /// Owner thread: a free buffer (holding the owner's reference), or -1 when every buffer is
  /// still read by some receiver.
  [[nodiscard]] int take();
  [[nodiscard]] std::byte* data(int i) const { return pool_.frame(i); }
  /// One more reference for a receiver: run it once that receiver no longer reads the bytes.
  [[nodiscard]] RxRelease share(const std::shared_ptr<SwitchBuffers>& self, int i);
  /// Drops a reference (the owner's, after handing the packet out). Any thread.
  void unref(int i) noexcept;
  /// Owner thread: buffers neither taken nor waiting on the return stack.
  [[nodiscard]] std::size_t free_count() const { return pool_.free_count(); }

 private:
  void take_returned();

  PacketPool pool_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> refs_;
  std::unique_ptr<int[]> next_;    // the return stack's links, by buffer
  std::atomic<int> returned_{-1};  // top of the return stack
};

/// A vif on a switch.
struct SwitchPort {
  DomId dom{};
  DevId dev{};
  net::FrontendOffloads offloads{};  // what its frontend takes on guest RX
  std::vector<std::shared_ptr<QueueLink>> queues;
};

/// A packet's 32-bit flow hash (MACs, IPv4/IPv6 addresses, TCP/UDP ports when present), to
/// spread a receiver's traffic over its queues while keeping each flow in order.
[[nodiscard]] std::uint32_t flow_hash(std::span<const std::byte> head);

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
    bool uplink = false;
    bool flooded = false;
    void clear() {
      guests.clear();
      uplink = false;
      flooded = false;
    }
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

  /// Learns `src` on `from`, then fills `out`: the destination's port if `dst` is known (none
  /// when that is `from` itself), else every other port and the uplink.
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
  SwitchPortId next_id_ = 1;
  Stats stats_;
  std::optional<net::TapDevice> uplink_;
  UniqueFd stop_fd_;  // eventfd: ends the uplink thread
  std::thread uplink_thread_;
  Route uplink_route_;  // the uplink thread's own
  std::shared_ptr<SwitchBuffers> uplink_buffers_ = std::make_shared<SwitchBuffers>();
};

/// The daemon's switches by name: made on first use and kept while a vif (or the daemon's
/// --switch-uplink declaration) holds them.
class SwitchRegistry {
 public:
  /// `uplinks`: switch name -> uplink TAP name; those switches exist from the start.
  explicit SwitchRegistry(const std::map<std::string, std::string>& uplinks = {});
  std::shared_ptr<VSwitch> get(const std::string& name);

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<VSwitch>> switches_;
  std::vector<std::shared_ptr<VSwitch>> declared_;
};

}  // namespace unetback::vif
