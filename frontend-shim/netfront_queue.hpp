// NetfrontQueue: one queue of a netfront — its TX and RX rings, the pages it grants the
// backend, its event channel(s) and its data path. Netfront creates one per negotiated queue.
//
// Memory granted to the backend (all from GrantSharer::share, granted once at setup):
//  * the two ring pages (read-write);
//  * one RX buffer page per RX ring slot (read-write): request id = ring index & 255 and
//    buffer = that page, as Linux netfront posts them;
//  * one TX copy page per TX request id (read-only): a copied frame is packed into them;
//  * a pool of TX buffer pages (read-only) handed out by alloc_tx_buffer(): a zerocopy
//    frame is sent from its own pages, which stay with the packet until its last response.
// A TX page (copy or pool) whose grant the backend still holds when its response arrives
// (mapped: GTF_reading) is not reused until the backend lets go; an RX buffer still held
// when its response arrives breaks the queue (netfront: "Grant still in use by backend").
//
// The backend is not trusted: a response producer running past what we asked for breaks the
// queue; a TX response naming an id not in flight is counted and ignored; RX responses are
// validated with parse_rx_packet.
//
// Single-threaded: one thread drives a queue (send, poll, handle_event).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/hv/event_channel.hpp"
#include "common/hv/grant_sharer.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/result.hpp"
#include "common/zerocopy/pending_limiter.hpp"
#include "frontend-shim/netfront_types.hpp"
#include "frontend-shim/tx_slot_plan.hpp"
#include "frontend-shim/xenbus_keys.hpp"

namespace unetback::netfront {

class NetfrontQueue;

/// A TX frame buffer made of granted pages (alloc_tx_buffer): write the frame into it, then
/// send() it. Sent zerocopy, its pages go to the backend as they are and return to the pool
/// after the last response; sent by copy, they return at once. An unsent buffer returns its
/// pages when destroyed. Move-only; may outlive its queue (then it just forgets the pages).
class TxBuffer {
 public:
  TxBuffer() = default;
  ~TxBuffer();
  TxBuffer(TxBuffer&& o) noexcept;
  TxBuffer& operator=(TxBuffer&& o) noexcept;
  TxBuffer(const TxBuffer&) = delete;
  TxBuffer& operator=(const TxBuffer&) = delete;

  /// The frame length the buffer was made for.
  [[nodiscard]] std::size_t size() const { return len_; }
  /// The frame as page-bounded pieces, in order (piece 0 starts at the queue's headroom),
  /// e.g. for readv() from a TAP.
  [[nodiscard]] std::size_t segment_count() const { return plan_.count; }
  [[nodiscard]] std::span<std::byte> segment(std::size_t i) const;
  /// Copies `data` into the frame at `offset`; false if it does not fit.
  bool write(std::size_t offset, std::span<const std::byte> data);
  /// Shortens the frame to its first `len` bytes (e.g. after a read() shorter than the
  /// buffer) and gives the pages it no longer needs back to the queue. Errors:
  /// invalid_argument for more than size() or less than an Ethernet header.
  std::error_code shrink(std::size_t len);

 private:
  friend class NetfrontQueue;
  void release();

  std::weak_ptr<NetfrontQueue> queue_;
  // Pool page indices and their local addresses, one per slot (plan_.count of them; fixed
  // arrays: a buffer never allocates).
  std::array<std::uint32_t, kMaxTxDataSlots> pages_{};
  std::array<std::byte*, kMaxTxDataSlots> addrs_{};
  std::uint32_t npages_ = 0;
  TxSlotPlan plan_;
  std::size_t len_ = 0;
};

/// Which of a queue's event channels fired.
struct EventKinds {
  bool tx = false;
  bool rx = false;
};

struct QueueSetup {
  QueueId id{};
  DomId backend{};
  bool split_event_channels = false;
  bool tx_sg = false, tx_gso_tcpv4 = false, tx_gso_tcpv6 = false;
  std::uint32_t rx_budget = 64;
  RxRefillRule rx_refill = RxRefillRule::early;
  zerocopy::LimiterConfig limiter;
  std::uint16_t tx_headroom = 0;
  std::uint32_t tx_buffer_pages = 320;
  /// Kick the backend when re-posted RX buffers cross its req_event (feature-rx-notify);
  /// a frontend without it never does.
  bool rx_refill_kick = true;
  /// win-xenvif's RX checks (NetfrontOptions::rx_checks).
  bool rx_checks = false;
};

class NetfrontQueue : public std::enable_shared_from_this<NetfrontQueue> {
 public:
  static constexpr std::uint32_t kTxRingSize = ring::TxFrontRing::size();
  static constexpr std::uint32_t kRxRingSize = ring::RxFrontRing::size();

  /// Grants the pages, initialises the rings, posts a full ring of RX buffers and allocates
  /// the unbound event channel(s) for the backend. `sharer` must outlive the queue.
  static Result<std::shared_ptr<NetfrontQueue>> create(hv::GrantSharer& sharer,
                                                       std::unique_ptr<hv::EventChannel> channel,
                                                       const QueueSetup& setup);
  ~NetfrontQueue();
  NetfrontQueue(const NetfrontQueue&) = delete;
  NetfrontQueue& operator=(const NetfrontQueue&) = delete;

  /// The refs and ports to publish in xenstore.
  [[nodiscard]] QueueKeys keys() const;

  [[nodiscard]] Result<TxSendInfo> send(std::span<const std::byte> frame, const TxMeta& meta);
  [[nodiscard]] Result<TxBuffer> alloc_tx_buffer(std::size_t len);
  [[nodiscard]] Result<TxSendInfo> send(TxBuffer&& buffer, const TxMeta& meta);
  [[nodiscard]] Result<TxSendInfo> send_raw(std::span<const RawTxSlot> slots,
                                            std::span<const std::byte> data, const TxMeta& meta,
                                            std::optional<std::uint16_t> first_size);

  /// Up to rx_budget packets, each copied into `out` (appended); then the refill rule.
  std::size_t poll(std::vector<RxPacket>& out);
  /// Up to rx_budget packets, each given to `sink` where it lies in the RX pages (no copy,
  /// no allocation); then sink.flush() and the refill rule (seed 002).
  std::size_t poll(RxSink& sink);
  [[nodiscard]] int event_fd() const { return channel_->fd(); }
  EventKinds handle_event();
  /// Takes the TX responses (netfront's xennet_tx_buf_gc) and re-checks held pages.
  void process_tx_responses();

  [[nodiscard]] NetfrontStats stats() const { return stats_; }
  [[nodiscard]] zerocopy::Stats limiter_stats() const { return limiter_.stats(); }
  [[nodiscard]] bool broken() const { return broken_; }
  [[nodiscard]] std::uint32_t tx_free_slots() const { return tx_->free_requests(); }
  /// TX pages (copy or pool) kept out of reuse because the backend still holds their grant.
  [[nodiscard]] std::size_t tx_held_pages() const { return held_ids_.size() + held_pool_.size(); }
  /// RX requests posted and not yet answered and processed.
  [[nodiscard]] std::uint32_t rx_posted() const { return rx_->req_prod_pvt().since(rx_processed_); }
  [[nodiscard]] ring::RingIndices tx_indices() const { return tx_->indices(); }
  [[nodiscard]] ring::RingIndices rx_indices() const { return rx_->indices(); }

 private:
  friend class TxBuffer;
  static constexpr std::uint32_t kNoPage = 0xFFFFFFFF;

  struct TxId {
    bool in_flight = false;
    bool copy_page = false;  // the slot's data is in this id's copy page
    std::uint16_t packet = 0;
  };
  struct TxPacketRec {
    std::uint32_t remaining = 0;
    bool failed = false;
    std::optional<zerocopy::Token> token;
    std::array<std::uint32_t, kMaxTxDataSlots> pool_pages{};  // a zerocopy frame's pages
    std::uint32_t npool = 0;
  };
  struct OutSlot {
    std::uint16_t id;
    GrantRef ref;
    std::uint16_t offset, size;
  };

  NetfrontQueue(hv::GrantSharer& sharer, std::unique_ptr<hv::EventChannel> channel,
                const QueueSetup& setup);

  [[nodiscard]] std::error_code check_meta(const TxMeta& meta) const;
  [[nodiscard]] bool room_for(std::uint32_t data_slots, const TxMeta& meta, bool linux_stop) const;
  Result<TxSendInfo> post_copy(std::span<const std::span<const std::byte>> pieces,
                               std::size_t total, const TxMeta& meta);
  Result<TxSendInfo> post_zerocopy(TxBuffer& buffer, const TxMeta& meta);
  void emit(std::span<const OutSlot> slots, std::uint16_t first_size, const TxMeta& meta);
  void emit_extras(const TxMeta& meta);
  void on_tx_response(const wire::TxResponse& rsp);
  void finish_packet(std::uint16_t packet);
  void release_held();
  [[nodiscard]] bool grant_held(GrantRef ref) const;
  void return_pool_pages(std::span<const std::uint32_t> pages);

  bool take_rx_responses();
  void post_rx_buffers(std::uint32_t n);
  void refill_if_due();
  void mark_broken(const char* why);
  /// rx_checks on one parsed packet at rx_pending_[rx_head_]: false if it must be dropped.
  bool check_rx_packet(const RxParse& p);

  hv::GrantSharer& sharer_;
  QueueSetup setup_;
  std::unique_ptr<hv::EventChannel> channel_;  // declared before the ports: outlives them
  hv::BoundPort tx_port_, rx_port_;            // rx_port_ unbound unless split
  hv::SharedPages ring_pages_, rx_pages_, tx_copy_pages_, tx_pool_;
  std::optional<ring::TxFrontRing> tx_;
  std::optional<ring::RxFrontRing> rx_;

  // TX
  std::array<TxId, kTxRingSize> ids_{};
  std::vector<std::uint16_t> free_ids_;  // a stack: the most recently freed id is reused first
  std::vector<std::uint16_t> held_ids_;  // answered, but the copy page is still held
  std::array<TxPacketRec, kTxRingSize> packets_{};
  std::vector<OutSlot> raw_out_;  // send_raw's slots (reused: its capacity stays)
  std::vector<std::uint16_t> free_packets_;
  std::vector<std::uint32_t> free_pool_, held_pool_;
  zerocopy::PendingLimiter limiter_;

  // RX: responses taken from the ring (copies) and not yet processed, in ring order from
  // rx_processed_. At most a ring's worth is pending; the array holds two for compaction.
  std::array<wire::RxResponse, 2 * kRxRingSize> rx_pending_{};
  std::uint32_t rx_head_ = 0, rx_tail_ = 0;
  RingIdx rx_processed_{0};

  NetfrontStats stats_;
  bool broken_ = false;
};

}  // namespace unetback::netfront
