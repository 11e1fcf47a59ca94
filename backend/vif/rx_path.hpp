// RxPath: host->guest for one queue (Linux netback's rx.c; docs/design.md, "Guest RX").
//
// Packets wait in a byte-capped queue; each one is laid into the frontend's posted buffers
// fully coalesced (rx_slot_planner), its chunks become grant-copy segments batched across
// packets (GrantCopyBatch), and the responses of a whole pass are pushed with one
// conditional notify. Work starts only when the ring has the slots the head packet needs
// (req_event armed, then rechecked); a head packet that waits too long expires, and a ring
// that stays short of slots for the head packet for rx-stall-timeout is a stall (carrier off).
//
// Single-threaded: owned and driven by one queue's event loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "backend/vif/grant_copy_batch.hpp"
#include "backend/vif/hash.hpp"
#include "backend/vif/queue_counters.hpp"
#include "backend/vif/ring_queue.hpp"
#include "backend/vif/rx_release.hpp"
#include "backend/vif/rx_slot_planner.hpp"
#include "backend/vif/vif_record.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/ring/shared_ring.hpp"

namespace unetback::vif {

/// At most this many source fragments per packet (a TAP frame is one; a VM->VM packet is
/// the sender's data slots).
inline constexpr std::size_t kMaxRxFrags = 18;

/// A packet waiting for the guest. Its bytes stay valid until `release` runs (after the
/// grant copies that read them completed, or when it is dropped).
struct RxPacket {
  std::array<RxFrag, kMaxRxFrags> frags{};
  std::uint32_t nr_frags = 0;
  std::uint32_t len = 0;
  net::GuestRxOffload offload{};  // netif flags + GSO extra for slot 0
  /// The Toeplitz hash the frontend asked for (a HASH extra after the GSO one).
  std::optional<PacketHash> hash;
  std::chrono::steady_clock::time_point expires{};
  RxRelease release;  // returns the buffer (or answers the sender's TX slots)
  /// VM->VM zerocopy: the sending queue's liveness. Once it stopped, its frontend may revoke
  /// the grants the frags name (and reuse the pages): the packet is dropped, not copied.
  std::shared_ptr<const std::atomic<bool>> source_alive;
};

/// A queue's RX backlog as other threads see it: VM->VM senders look before they copy or hold
/// a packet for a queue that would drop it (seed 000). Relaxed reads: a stale value lets one
/// packet more or less through, never more than the cap allows (RxPath::enqueue enforces it).
struct RxBacklog {
  std::atomic<std::uint32_t> queued{0};  // bytes in RxPath's queue, published by it
  std::atomic<std::uint32_t> cap{std::numeric_limits<std::uint32_t>::max()};  // queue_bytes
  /// Frames senders left out for the guest's multicast filter (QueueLink::count_mcast_filtered),
  /// not yet in the queue's rx_dropped_mcast_filter: RxPath moves them there, on its thread.
  std::atomic<std::uint64_t> mcast_filtered{0};
};

struct RxConfig {
  DomId frontend{};
  RxCoalesce coalesce = RxCoalesce::full;
  bool sg = true;  // frontend feature-sg: otherwise one slot per packet
  /// F:xdp-headroom: free bytes the frontend wants before the packet in its first buffer
  /// (0..kMaxRxHeadroom; the xenbus side refused anything else).
  std::uint32_t xdp_headroom = 0;
  std::uint32_t queue_bytes = 512 * 1024;  // XSA-392: hard cap, drop beyond
  std::chrono::milliseconds drain_timeout{10000};
  std::chrono::milliseconds stall_timeout{60000};
  bool stall_detection = true;  // off without feature-rx-notify (Linux)
  /// Without feature-rx-notify the frontend never kicks when it posts buffers: while the
  /// head packet waits for slots the ring is looked at again this often (Linux's RX thread
  /// wakes when the head's 30 ms drain timeout runs out, delivers, then drops what expired).
  std::optional<std::chrono::milliseconds> poll_interval;
  std::size_t copy_batch = 64;
  std::uint32_t max_packets_per_pass = 64;  // RX_BATCH_SIZE
  /// Where the queue publishes its queued bytes and cap (a queue on a switch); may be null.
  std::shared_ptr<RxBacklog> backlog;
  /// Where consumed buffers and published responses are recorded (vif_record.hpp).
  RxRecorder recorder;
};

class RxPath {
 public:
  using Clock = std::chrono::steady_clock;

  RxPath(ring::RxBackRing ring, hv::GrantTable& table, RxConfig config, QueueCounters& counters);
  ~RxPath();
  RxPath(const RxPath&) = delete;
  RxPath& operator=(const RxPath&) = delete;

  /// Queues a packet; drops it (running its release, counting why) when it would exceed the
  /// byte cap or cannot be delivered to this frontend. True if queued.
  bool enqueue(RxPacket&& p, Clock::time_point now);

  struct Pass {
    bool notify = false;  // the frontend asked to be told about these responses
    std::uint32_t packets = 0;
    bool waiting_for_slots = false;  // the head packet needs more posted buffers
  };
  /// Delivers as many queued packets as the ring has room for (at most
  /// max_packets_per_pass), in one batch of copies and one push; then, if the head packet
  /// still waits for slots, drops the head packets that expired (netback's order:
  /// rx_action, then drop_expired).
  Pass process(Clock::time_point now);

  /// Drops every queued VM->VM packet whose sender has stopped, wherever it sits in the
  /// queue (process() drops them only once they reach the head; a slow guest's queue could
  /// hold a dead sender's grant refs for many seconds). Returns how many.
  std::size_t purge_dead_sources();

  /// Stall bookkeeping for the carrier (netback: carrier off after stall_timeout without
  /// room for the head packet, on again once there is). Returns the new carrier state.
  bool update_carrier(Clock::time_point now);

  /// The frontend changed its xdp-headroom (xenbus Reconfiguring): packets laid out from now
  /// on start at the new offset; those already in the ring keep the offset their responses
  /// say. Called between passes, on the queue's thread.
  void set_xdp_headroom(std::uint32_t headroom) {
    config_.xdp_headroom = std::min(headroom, kMaxRxHeadroom);
  }
  [[nodiscard]] std::uint32_t xdp_headroom() const { return config_.xdp_headroom; }

  [[nodiscard]] bool empty() const { return queue_.empty(); }
  [[nodiscard]] std::uint32_t queued_bytes() const { return queued_bytes_; }
  [[nodiscard]] const ring::RxBackRing& ring() const { return ring_; }

 private:
  void drop_head(std::atomic<std::uint64_t>& reason);
  /// Adds the frames switch senders left out for the multicast filter (RxBacklog) to
  /// rx_dropped_mcast_filter, which only this thread writes.
  void count_filtered_by_senders();
  /// Lays the head packet into the ring (its responses written privately, its segments
  /// queued in the batch). The caller checked the slots are there.
  void deliver_head();
  void flush();
  void set_queued_bytes(std::uint32_t bytes) {
    queued_bytes_ = bytes;
    if (config_.backlog) config_.backlog->queued.store(bytes, std::memory_order_relaxed);
  }

  ring::RxBackRing ring_;
  hv::GrantTable& table_;
  RxConfig config_;
  QueueCounters& counters_;
  GrantCopyBatch batch_;
  RxPlan plan_;
  RingQueue<RxPacket> queue_;
  std::uint32_t queued_bytes_ = 0;
  /// Packets whose copies sit in the batch: released after the flush.
  std::vector<RxRelease> awaiting_flush_;
  /// The responses written this pass, by ring slot, so a failed copy can rewrite the status.
  std::array<wire::RxResponse, ring::RxBackRing::kSize> rsp_shadow_{};
  std::optional<Clock::time_point> short_of_slots_since_;
  bool carrier_ = true;
};

}  // namespace unetback::vif
