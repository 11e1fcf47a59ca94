// TxPath: guest->host for one queue (netback.c's TX side, netback-facts §1.3).
//
// Each pass takes up to 64 packets off the TX ring (parse_tx_packet: every request copied
// once, every rule checked on the copy), charges the `rate` credit, and lets the
// PendingLimiter choose per packet between zerocopy (the first bytes grant-copied into a
// linear header, the rest of each slot grant-mapped and handed to the sink straight from the
// guest's pages) and copy (the whole packet grant-copied into backend memory). To a TAP, the
// MapChooser (tx-map) may copy a pass's zerocopy packets too, when copying measures cheaper
// on this host. All copies of a pass go in one GrantTable::copy, all maps in one
// GrantTable::map. A failed copy or map is
// the guest's problem: error responses, never an abort (XSA-362). A protocol violation makes
// process() report `fatal`; the owner disables the vif from its event loop (XSA-90).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/vif/credit.hpp"
#include "backend/vif/mcast_filter.hpp"
#include "backend/vif/packet_pool.hpp"
#include "backend/vif/packet_sink.hpp"
#include "backend/vif/queue_counters.hpp"
#include "backend/vif/tx_request_parser.hpp"
#include "backend/vif/vswitch.hpp"
#include "common/hv/grant_table.hpp"
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
  std::uint32_t max_packets_per_pass = 64;  // NAPI budget
  std::optional<SwitchAttachment> sw;
  /// The vif's multicast filter, amended by MCAST_ADD/DEL extras (null: accepted, unused).
  std::shared_ptr<McastFilter> mcast;
};

class TxPath {
 public:
  using Clock = std::chrono::steady_clock;

  TxPath(ring::TxBackRing ring, hv::GrantTable& table, PacketSink& sink, TxConfig config,
         QueueCounters& counters);

  struct Pass {
    bool notify = false;
    bool fatal = false;
    TxError fatal_reason = TxError::none;
    std::uint32_t packets = 0;
    /// Stopped by the rate limit: call again at `retry_at` (when the head packet's credit
    /// is there, never sooner than Credit::kMinRetry).
    std::optional<Clock::time_point> retry_at;
    /// More requests were left (budget exhausted): call again soon.
    bool more = false;
    /// zerocopy-fallback=0 on a switch: stopped at the pending limit; call again after
    /// complete_switched() gave buffers back.
    bool stalled = false;
  };
  Pass process(Clock::time_point now);

  void set_rate(std::uint64_t bytes, std::uint64_t usecs, Clock::time_point now) {
    credit_.set_rate(bytes, usecs, now);
  }
  /// RING_FINAL_CHECK_FOR_REQUESTS: true if requests arrived after all (call process()
  /// again); otherwise the frontend will notify on its next request.
  [[nodiscard]] bool final_check() { return ring_.final_check_for_requests(); }
  [[nodiscard]] const ring::TxBackRing& ring() const { return ring_; }
  [[nodiscard]] const zerocopy::PendingLimiter& limiter() const { return limiter_; }
  [[nodiscard]] const zerocopy::MapChooser& map_chooser() const { return chooser_; }

  /// Switch mode: receivers are done with these zerocopy packets; answers their slots and
  /// returns whether the frontend must be notified. Unknown tokens are ignored.
  bool complete_switched(std::span<const QueueLink::TxDone> done);

 private:
  struct SlotPart {           // a piece of a data slot that is mapped (zerocopy)
    std::uint32_t map_index;  // page index in this pass's mapping
    std::uint16_t offset;     // in that page
    std::uint16_t len;
  };
  struct Pending {
    TxPacket pkt;
    int buf = -1;
    bool zerocopy = false;
    std::optional<zerocopy::Token> token;
    std::uint32_t seg_begin = 0, seg_end = 0;            // its copy segments in segs_
    std::uint32_t fallback_begin = 0, fallback_end = 0;  // remainder copied after a failed map
    std::uint32_t part_begin = 0, part_end = 0;          // its mapped parts in parts_
    std::uint32_t linear_len = 0;                        // zerocopy: bytes in the linear buffer
    // Switch mode: what became of the packet after the header copy.
    enum class Fate : std::uint8_t { undecided, answered, held, copy } fate = Fate::undecided;
    net::VirtioNetHdr vh{};
    std::uint32_t hash = 0;
    bool in_sink = false;  // taken by the sink: its outcome comes with the sink's flush
  };

  /// Handles one parsed packet of verdict ok: queues its copy segments (and map refs).
  void stage(TxPacket&& pkt);
  void add_copy_segments(Pending& p, std::uint32_t from_byte);
  /// One GrantTable::copy of `segs` (if any), counted in tx_copy_segments / tx_copy_calls.
  void copy_counted(std::span<hv::GrantCopySegment> segs);
  void respond(const TxPacket& pkt, std::int16_t status);
  void finish_pass(Pass& pass);
  void deliver(Pending& p, const hv::MappedGrants* mapped);
  /// Completes the frames the sink took this pass and counts each one sent or dropped.
  void flush_sink();
  // Switch mode (stage_switched copies only the headers; finish_switched routes each packet,
  // forwards unicast guest packets zerocopy as grant refs when the limiter allows and copies
  // the others into backend memory).
  void stage_switched(TxPacket&& pkt);
  void finish_switched(Pass& pass, Clock::time_point now);
  bool forward_zerocopy(Pending& p, const net::VirtioNetHdr& vh, const SwitchPort& to,
                        std::uint32_t hash);
  void forward_copied(Pending& p, const net::VirtioNetHdr& vh, const VSwitch::Route& route,
                      std::uint32_t hash);
  void push_and_recycle(Pass& pass);
  /// A copy of `bytes` in one of copies_' buffers (`buf`, holding our reference), or on the
  /// heap (`heap`) while every buffer is still read by some receiver.
  std::byte* copy_out(std::span<const std::byte> bytes, int& buf,
                      std::shared_ptr<std::byte[]>& heap);

  ring::TxBackRing ring_;
  hv::GrantTable& table_;
  PacketSink& sink_;
  TxConfig config_;
  QueueCounters& counters_;
  zerocopy::PendingLimiter limiter_;
  zerocopy::MapChooser chooser_;
  std::optional<bool> pass_maps_;          // this pass's MapChooser answer, once asked
  std::uint64_t pass_mappable_bytes_ = 0;  // bytes of this pass's packets that could be mapped
  Credit credit_;
  PacketPool pool_;
  std::optional<TxPacket> deferred_;  // parsed, waiting for credit (or for the zerocopy limit)
  std::vector<Pending> pending_;
  std::vector<hv::GrantCopySegment> segs_;
  std::vector<GrantRef> refs_;
  std::vector<SlotPart> parts_;
  std::vector<iovec> iov_;
  std::vector<std::error_code> sink_results_;
  // Switch mode: zerocopy packets waiting for their receiver, by token index (ring-size slots).
  struct Held {
    std::optional<TxPacket> pkt;
    std::optional<zerocopy::Token> token;
  };
  std::vector<Held> held_;
  std::vector<VSwitch::Route> routes_;     // per pending packet of the pass
  std::vector<RouteQuery> queries_;        // per pending packet of the pass
  std::shared_ptr<SwitchBuffers> copies_;  // switch mode: copied packets' bytes
};

}  // namespace unetback::vif
