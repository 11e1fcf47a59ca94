// VifHandle: the seam between the daemon (BackendManager: xenstore watches, tunables, control
// socket) and the vif layer (rings, TAP, data paths), declared by the vif layer that implements
// it (Vif, VifFactoryImpl) so that the vif layer needs no daemon header. The manager creates one
// VifHandle per backend directory through a VifFactory and drives it with a BackendXenbus; it reads
// statistics and ring indices for unetback-ctl through the same handle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/xenbus/xenbus_adapter.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/strong_id.hpp"
#include "common/zerocopy/map_chooser.hpp"

namespace unetback::vif {

/// One queue's counters (name -> value, names stable for scripts: "rx_packets", ...) and the
/// indices of its two rings.
struct QueueReport {
  QueueId queue{};
  std::vector<std::pair<std::string, std::uint64_t>> counters;
  ring::RingIndices tx_ring{};
  ring::RingIndices rx_ring{};
};

struct VifReport {
  DomId frontend{};
  DevId devid{};
  std::string tap_name;
  bool connected = false;
  bool carrier = false;
  /// How the vif came to this daemon: "fresh" (connected here), "taken_over" (from a daemon
  /// that handed it over), "recovered" (from the record of a daemon that died), "reconnected"
  /// (found served by an earlier daemon, not adoptable: the frontend connected again).
  std::string adopted = "fresh";
  std::vector<QueueReport> queues;
};

/// A vif as the daemon sees it: the xenbus side's VifControl plus reporting.
class VifHandle : public xenbus::VifControl {
 public:
  /// A consistent-enough snapshot (counters are summed per queue; safe from any thread).
  [[nodiscard]] virtual VifReport report() const = 0;
  /// True when the data path disabled the vif (a protocol violation by the frontend): the
  /// manager then reports it fatal through xenbus (from the manager's thread, XSA-90).
  [[nodiscard]] virtual bool disabled() const = 0;
  /// A planned takeover: stops the queues at a pass boundary, marks the record handed over
  /// and keeps the TAP (persistent) for the successor; nothing is written to xenstore, and
  /// nothing else is released: the daemon's image ends right after (execve for an upgrade in
  /// place, exit for a successor), and the kernel unmaps, unbinds and closes everything at
  /// once, as when a daemon dies, instead of call after call while the guest waits. From here
  /// the vif is inert: destroying it releases memory only.
  virtual void hand_over() {}
};

/// A TAP's queue length while a queue of its vif is stalled (carrier off): Linux netback's
/// (XENVIF_QUEUE_LENGTH).
inline constexpr std::uint32_t kTapQueueLenStalled = 32;

/// Daemon-wide tunables (xenstore: /local/domain/<self>/unetback/<name>), as the vif layer
/// needs them when a vif connects. Changes apply to vifs that connect afterwards.
struct Tunables {
  std::uint32_t max_queues = 4;               // advertised multi-queue-max-queues
  std::uint32_t copy_batch = 64;              // grant-copy segments per call
  std::uint32_t max_pending = 128;            // zerocopy in-flight cap (PendingLimiter)
  std::uint32_t goodcopy_len = 256;           // zerocopy only for packets at least this long
  bool zerocopy_fallback = true;              // false: stall at the limit (seed 000 comparison)
  std::uint32_t rx_queue_bytes = 512 * 1024;  // per-queue guest-RX byte cap
  std::uint32_t rx_drain_timeout_ms = 10000;  // a queued guest-RX packet expires after this
  std::uint32_t rx_stall_timeout_ms = 60000;  // no RX progress this long -> carrier off
  std::uint32_t fatal_skb_slots = 20;         // TX chains this long disable the vif
  bool rx_coalesce_full = true;               // "full" or "legacy" (pre-2015 rule)
  std::uint32_t threads = 2;                  // event-loop threads serving the queues
  zerocopy::MapMode tx_map = zerocopy::MapMode::auto_choice;  // guest TX to a TAP: map/copy
  // Packets a TAP queue holds for the daemon (its txqueuelen): the only buffer between the host
  // and a daemon thread that is not running, so it takes bursts (tun's own default). While a
  // guest's RX is stalled it is kTapQueueLenStalled instead.
  std::uint32_t tap_queue_len = 500;
  friend bool operator==(const Tunables&, const Tunables&) = default;
};

class VifFactory {
 public:
  virtual ~VifFactory() = default;
  /// A new, unconnected vif for `frontend`'s device `devid`, with the tunables now in force.
  virtual std::unique_ptr<VifHandle> make_vif(DomId frontend, DevId devid,
                                              const Tunables& tunables) = 0;
};

}  // namespace unetback::vif
