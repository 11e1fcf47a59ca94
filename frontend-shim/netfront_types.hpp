// The public value types of Netfront: options, per-packet metadata, received packets and
// counters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/util/strong_id.hpp"
#include "common/wire/netif.hpp"
#include "common/zerocopy/pending_limiter.hpp"
#include "frontend-shim/rx_refill.hpp"
#include "frontend-shim/rx_response_parser.hpp"

namespace unetback::netfront {

struct NetfrontOptions {
  DevId devid{0};
  /// Queues requested; capped by the backend's multi-queue-max-queues (1 if it has none).
  std::uint32_t queues = 1;
  /// Features we ask for (each TX offload is used only if the backend offers it too).
  bool sg = true, gso_tcpv4 = true, gso_tcpv6 = true, csum_ipv6 = true, rx_notify = true;
  /// Packets per poll() (NAPI budget); also seed 002's refill rule:
  /// refill when free requests > min(rx_budget, ring_size) / 2.
  std::uint32_t rx_budget = 64;
  /// Which refill rule to apply (early = seed 002's, above; half_ring = the old one, for
  /// comparison).
  RxRefillRule rx_refill = RxRefillRule::early;
  /// Use separate TX and RX event channels if the backend offers feature-split-event-channels.
  bool split_event_channels = true;
  /// TX zerocopy (grant the packet's own buffer) vs copy (into the slot's own page).
  zerocopy::LimiterConfig tx_limiter;
  /// Where a frame's data starts in its first page (Linux: NET_SKB_PAD + NET_IP_ALIGN);
  /// the first slot then holds at most 4096 - tx_headroom bytes. At most 2048.
  std::uint16_t tx_headroom = 0;
  /// Granted pages per queue for TX buffers handed out by alloc_tx_buffer() (zerocopy).
  std::uint32_t tx_buffer_pages = 320;
  /// Offer a control ring (ctrl-ring-ref, event-channel-ctrl) when the backend advertises
  /// feature-ctrl-ring; Netfront::ctrl() then drives it.
  bool ctrl_ring = false;
  /// win-xenvif: multi-queue-num-queues even without a backend maximum, even for 1 queue.
  bool always_write_num_queues = false;
  /// Write the feature-* keys (and multi-queue-num-queues) at all: Mini-OS writes only the
  /// rings, the event channel, request-rx-copy and the state. Without them the backend sees
  /// no rx-notify, no SG.
  bool feature_keys = true;
  /// win-xenvif's RX checks (NetfrontStats::rx_protocol_errors): each data response at its
  /// request's ring slot (id == index & 255), each GSO packet with csum_blank and
  /// data_validated.
  bool rx_checks = false;
  /// request-multicast-control=1 when the backend offers feature-multicast-control or
  /// feature-dynamic-multicast-control (then only added groups reach us).
  bool request_multicast_control = false;
  /// Free bytes the backend is asked to leave before each received packet in its first
  /// buffer (xdp-headroom, 0..kMaxXdpHeadroom), when it offers feature-xdp-headroom.
  std::uint32_t xdp_headroom = 0;
};

/// netif.h XEN_NETIF_MAX_XDP_HEADROOM.
inline constexpr std::uint32_t kMaxXdpHeadroom = 0x7FFF;

/// Per-frame TX metadata (netif TX flags and the GSO extra).
struct TxMeta {
  bool csum_blank = false;      ///< NETTXF_csum_blank: L4 checksum is partial
  bool data_validated = false;  ///< NETTXF_data_validated
  std::optional<RxGso> gso;     ///< a GSO extra {type, size} after the first request
  /// An MCAST_ADD (add) or MCAST_DEL extra for this multicast MAC (after the GSO one). On a
  /// dummy one-slot request of size 0 (send_raw), it amends the backend's multicast filter.
  struct Mcast {
    bool add = true;
    std::array<std::uint8_t, 6> addr{};
  };
  std::optional<Mcast> mcast;
  /// A HASH extra (netif.h XEN_NETIF_EXTRA_TYPE_HASH: the type's bit number, the algorithm,
  /// the value), after the GSO and MCAST ones; win-xenvif attaches one to TX packets.
  std::optional<RxHash> hash;
};

/// What send() did with a frame.
struct TxSendInfo {
  std::uint32_t slots = 0;  ///< data slots (the GSO extra not counted)
  bool zerocopy = false;    ///< the frame's own pages were granted (else copied)
};

/// One slot of a raw TX layout (send_raw): `size` bytes at `offset` of the slot's page.
struct RawTxSlot {
  std::uint16_t offset = 0;
  std::uint16_t size = 0;
};

struct RxPacket {
  std::vector<std::byte> bytes;
  wire::RxFlags flags;  ///< of data slot 0 (csum_blank, data_validated, ...)
  std::optional<RxGso> gso;
  std::optional<RxHash> hash;    ///< the backend's Toeplitz hash (control ring)
  std::uint32_t slots_used = 0;  ///< ring slots consumed, extras included
};

/// One received packet where it lies: `segments` are its bytes in the queue's RX buffer
/// pages, in order. They are writable (the pages are ours until the refill that ends the
/// poll) and valid only during the RxSink::deliver call that is given them.
struct RxView {
  std::span<const std::span<std::byte>> segments;
  std::uint32_t bytes = 0;  ///< the sum of the segments' sizes
  wire::RxFlags flags;      ///< of data slot 0
  std::optional<RxGso> gso;
  std::optional<RxHash> hash;    ///< the backend's Toeplitz hash (control ring)
  std::uint32_t slots_used = 0;  ///< ring slots consumed, extras included
};

/// Takes the packets of a poll where they lie (no copy, no allocation), before their
/// buffers are posted to the backend again.
class RxSink {
 public:
  virtual void deliver(const RxView& packet) = 0;
  /// Called once after the poll's last packet, before the refill: whatever still reads the
  /// pages (queued writes) must be finished when it returns.
  virtual void flush() {}

 protected:
  ~RxSink() = default;
};

/// Monotonic counters (per queue; Netfront::stats() sums the queues).
struct NetfrontStats {
  std::uint64_t tx_packets = 0, tx_bytes = 0, tx_slots = 0;
  std::uint64_t tx_zerocopy = 0, tx_copy = 0;
  std::uint64_t tx_busy = 0;             ///< send() refused: fewer than 19 free slots / ids / pages
  std::uint64_t tx_completed = 0;        ///< packets whose every slot was answered
  std::uint64_t tx_error_responses = 0;  ///< slots answered ERROR or DROPPED
  std::uint64_t tx_bad_response_id = 0;  ///< responses naming an id not in flight (ignored)
  std::uint64_t tx_pages_held = 0;       ///< answered slots whose page the backend still held
  std::uint64_t tx_notify_sent = 0, tx_notify_suppressed = 0;
  std::uint64_t rx_packets = 0, rx_bytes = 0, rx_slots = 0;
  std::array<std::uint64_t, kRxDropCount> rx_drops{};  ///< indexed by RxDrop
  std::uint64_t rx_refills = 0, rx_requests_posted = 0;
  std::uint64_t rx_notify_sent = 0, rx_notify_suppressed = 0;
  std::uint64_t broken = 0;  ///< queues that stopped because the backend broke the protocol
  /// rx_checks: packets whose slots were checked, GSO packets whose flags were checked, and
  /// the violations (a response out of its request's slot: dropped; a GSO packet without
  /// both csum_blank and data_validated: delivered, as win-xenvif's release build does).
  std::uint64_t rx_slot_checked = 0, rx_gso_checked = 0, rx_protocol_errors = 0;

  [[nodiscard]] std::uint64_t rx_dropped(RxDrop why) const {
    return rx_drops[static_cast<std::size_t>(why)];
  }
  NetfrontStats& operator+=(const NetfrontStats& o);
};

}  // namespace unetback::netfront
