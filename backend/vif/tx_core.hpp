// TxCore: what both delivery engines of a TxPath share (Linux netback.c's TX side; see
// docs/design.md, "Guest TX"): the TX ring, the per-pass packet list and its copy segments,
// the parse loop with its drops, multicast extras, rate limit and zerocopy stall, the header
// gather, the segment and offload checks, the responses and the counters.
//
// The engines (TxToTap, TxToSwitch) take the core as a parameter of every call, so that a
// TxPath stays movable and every call on the hot path is a direct one (no virtual call, no
// allocation per packet: the vectors are reserved once, here).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/vif/credit.hpp"
#include "backend/vif/mcast_filter.hpp"
#include "backend/vif/packet_pool.hpp"
#include "backend/vif/queue_counters.hpp"
#include "backend/vif/tx_request_parser.hpp"
#include "backend/vif/vif_record.hpp"
#include "backend/vif/vswitch.hpp"
#include "common/hv/grant_table.hpp"
#include "common/net/vnet_hdr.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/zerocopy/map_chooser.hpp"
#include "common/zerocopy/pending_limiter.hpp"

namespace unetback::vif {

/// Bytes grant-copied into the linear part ahead of the mapped data: netback's
/// XEN_NETBACK_TX_COPY_LEN is 128; we take 256 so IPv6 extension headers and TCP options
/// still land in it (XSA-423: all protocol headers linear, gathered across tiny slots).
inline constexpr std::uint32_t kTxLinearLen = 256;

/// A queue of a vif on an internal switch: its packets go to the switch instead of the sink.
struct SwitchAttachment {
  std::shared_ptr<VSwitch> sw;
  SwitchPortId port = 0;
  std::shared_ptr<QueueLink> self;  // where receivers report this queue's zerocopy packets done
  std::shared_ptr<std::atomic<bool>> alive;  // cleared when this queue stops
  /// The vif's B:mac: guest TX with another source MAC is dropped (it would take over that
  /// MAC's port) unless `allow_spoofing` is set. nullopt: no B:mac, nothing to check against.
  std::optional<net::MacAddress> guest_mac;
  std::shared_ptr<const std::atomic<bool>> allow_spoofing;  // B:unetback-allow-mac-spoofing
};

struct TxConfig {
  DomId frontend{};
  TxParseLimits limits{};
  zerocopy::LimiterConfig zerocopy{};
  /// To a TAP: map the packets the limiter lets go zerocopy (always), copy them (never), or
  /// whichever each pass measures cheaper (auto). Not used on a switch (no mapping there).
  zerocopy::MapMode map_mode = zerocopy::MapMode::auto_choice;
  /// What times a pass for the chooser (read twice per timed pass); empty: the steady clock. Tests
  /// give a clock that only their grant table's simulated costs move.
  std::function<std::chrono::steady_clock::time_point()> pass_clock;
  std::uint32_t max_packets_per_pass = 64;  // NAPI budget
  std::optional<SwitchAttachment> sw;
  /// The vif's multicast filter, amended by MCAST_ADD/DEL extras (null: accepted, unused).
  std::shared_ptr<McastFilter> mcast;
  /// Where consumed requests and answers are recorded for a successor (vif_record.hpp).
  TxRecorder recorder;
};

/// What one TX pass did, and when to run the next.
struct TxPass {
  bool notify = false;
  bool fatal = false;
  TxError fatal_reason = TxError::none;
  std::uint32_t packets = 0;
  /// Stopped by the rate limit: call again at `retry_at` (when the head packet's credit
  /// is there, never sooner than Credit::kMinRetry).
  std::optional<std::chrono::steady_clock::time_point> retry_at;
  /// More requests were left (budget exhausted): call again soon.
  bool more = false;
  /// zerocopy-fallback=0 on a switch: stopped at the pending limit; call again after
  /// complete_switched() gave buffers back.
  bool stalled = false;
};

/// One packet of a pass, from its parse to its response.
struct TxPending {
  TxPacket pkt;
  int buf = -1;                                        // its buffer in the core's pool
  std::uint32_t seg_begin = 0, seg_end = 0;            // its first copy segments in segs()
  std::uint32_t fallback_begin = 0, fallback_end = 0;  // the rest, copied in a second call
  std::uint32_t linear_len = 0;  // header-first: bytes gathered into the buffer's start
};

class TxCore {
 public:
  using Clock = std::chrono::steady_clock;

  TxCore(ring::TxBackRing ring, hv::GrantTable& table, const TxConfig& config,
         QueueCounters& counters);

  /// Starts a pass: false (and `pass` fatal) when the frontend's request producer is
  /// impossible; otherwise the previous pass's packets and segments are forgotten.
  bool begin_pass(TxPass& pass);

  enum class Next : std::uint8_t { packet, done, fatal };
  /// Parses the next packet of the pass into `out` (`packet`: verdict ok and its credit
  /// taken; the caller stages it). Drops and multicast extras are answered here. `done`: the
  /// pass has its budget, the ring is empty, or it waits for credit or for the zerocopy
  /// limit (`pass` says which). `fatal`: a protocol violation, recorded in `pass`.
  Next next_packet(TxPass& pass, Clock::time_point now, TxPacket& out);

  /// A packet of the pass, with a buffer of the pool; its segments start at the end of segs().
  TxPending& add_pending(const TxPacket& pkt);
  /// Copy segments for bytes [from_byte, total) of the packet into its buffer, one per slot.
  void add_copy_segments(TxPending& p, std::uint32_t from_byte);
  /// Copy segments for the first p.linear_len bytes into its buffer, gathered across however
  /// many slots hold them (XSA-423); calls `rest(slot, linear_bytes_taken)` for every
  /// non-empty slot that holds more than its share of the linear part.
  template <typename Rest>
  void gather_header(TxPending& p, Rest&& rest);
  /// One GrantTable::copy of `segs` (if any), counted in tx_copy_segments, tx_copy_calls,
  /// tx_copy_ops and tx_copy_hypercalls.
  void copy_counted(std::span<hv::GrantCopySegment> segs);
  /// Every copy segment of the packet (first and fallback) read the guest's page.
  [[nodiscard]] bool segments_ok(const TxPending& p) const;
  /// A copy from the guest failed: dropped, answered ERROR.
  void drop_copy_error(const TxPacket& pkt);
  /// The packet's offload request as a virtio_net_hdr over its copied head; nullopt (counted
  /// in tx_drop_offload) when the guest asked for something the head does not support.
  std::optional<net::VirtioNetHdr> guest_header(const TxPacket& pkt, std::span<std::byte> head,
                                                std::uint32_t frame_len);
  void count_zero_size_slots(const TxPacket& pkt);
  void count_copy_reason(zerocopy::CopyReason r);
  /// A packet that left the queue (to the TAP or the switch).
  void count_sent(const TxPacket& pkt, bool zerocopy);
  void respond(const TxPacket& pkt, std::int16_t status);
  void respond_okay(const TxPacket& pkt) {
    respond(pkt, static_cast<std::int16_t>(wire::RspStatus::okay));
  }
  /// Ends the pass: counts it, pushes the responses (pass.notify), gives the buffers back.
  void push_and_recycle(TxPass& pass);
  /// Pushes responses written outside a pass; true if the frontend must be notified.
  bool push_responses();

  void set_rate(std::uint64_t bytes, std::uint64_t usecs, Clock::time_point now) {
    credit_.set_rate(bytes, usecs, now);
  }
  /// A `rate` holds TX back: passes need the precise clock (their retry deadlines are waited
  /// for); otherwise the coarse one does (see coarse_clock.hpp).
  [[nodiscard]] bool rate_limited() const { return !credit_.unlimited(); }
  [[nodiscard]] ring::TxBackRing& ring() { return ring_; }
  [[nodiscard]] const ring::TxBackRing& ring() const { return ring_; }
  [[nodiscard]] hv::GrantTable& table() { return table_; }
  [[nodiscard]] const TxConfig& config() const { return config_; }
  [[nodiscard]] QueueCounters& counters() { return counters_; }
  [[nodiscard]] zerocopy::PendingLimiter& limiter() { return limiter_; }
  [[nodiscard]] const zerocopy::PendingLimiter& limiter() const { return limiter_; }
  [[nodiscard]] zerocopy::MapChooser& map_chooser() { return chooser_; }
  [[nodiscard]] const zerocopy::MapChooser& map_chooser() const { return chooser_; }
  [[nodiscard]] std::byte* frame(const TxPending& p) const { return pool_.frame(p.buf); }
  [[nodiscard]] std::vector<TxPending>& pending() { return pending_; }
  [[nodiscard]] std::vector<hv::GrantCopySegment>& segs() { return segs_; }

 private:
  ring::TxBackRing ring_;
  hv::GrantTable& table_;
  TxConfig config_;
  QueueCounters& counters_;
  zerocopy::PendingLimiter limiter_;
  zerocopy::MapChooser chooser_;  // to a TAP: map or copy (TxToTap asks it once a pass)
  Credit credit_;
  PacketPool pool_;
  std::optional<TxPacket> deferred_;  // parsed, waiting for credit (or for the zerocopy limit)
  std::vector<TxPending> pending_;
  std::vector<hv::GrantCopySegment> segs_;
};

template <typename Rest>
void TxCore::gather_header(TxPending& p, Rest&& rest) {
  std::byte* at = frame(p);
  std::uint32_t pos = 0;
  for (std::uint32_t i = 0; i < p.pkt.nr_slots; ++i) {
    const TxSlot& s = p.pkt.slots[i];
    if (s.size == 0) continue;
    const std::uint32_t linear_here =
        pos < p.linear_len ? std::min<std::uint32_t>(s.size, p.linear_len - pos) : 0;
    if (linear_here != 0) {
      hv::GrantCopySegment seg;
      seg.source = hv::GrantCopyPtr::granted(config_.frontend, s.gref, s.offset);
      seg.dest = hv::GrantCopyPtr::local(at + pos);
      seg.len = static_cast<std::uint16_t>(linear_here);
      segs_.push_back(seg);
    }
    if (linear_here < s.size) rest(s, linear_here);
    pos += s.size;
  }
}

}  // namespace unetback::vif
