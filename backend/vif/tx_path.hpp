// TxPath: guest->host for one queue (Linux netback.c's TX side; docs/design.md, "Guest TX").
//
// Each pass takes up to 64 packets off the TX ring (parse_tx_packet: every request copied
// once, every rule checked on the copy), charges the `rate` credit, and hands each packet to
// the queue's delivery engine: TxToTap (the vif's TAP, zerocopy by grant maps or copied, see
// tx_to_tap.hpp) or TxToSwitch (an internal switch, zerocopy as grant refs or copied, see
// tx_to_switch.hpp). Both work over one TxCore (tx_core.hpp): the parse loop, the header
// gather, the checks, the responses and the counters. A failed copy or map is the guest's
// problem: error responses, never an abort (XSA-362). A protocol violation makes process()
// report `fatal`; the owner disables the vif from its event loop (XSA-90).
#pragma once

#include <chrono>
#include <optional>
#include <span>

#include "backend/vif/packet_sink.hpp"
#include "backend/vif/queue_counters.hpp"
#include "backend/vif/tx_core.hpp"
#include "backend/vif/tx_to_switch.hpp"
#include "backend/vif/tx_to_tap.hpp"
#include "common/hv/grant_table.hpp"
#include "common/ring/shared_ring.hpp"

namespace unetback::vif {

class TxPath {
 public:
  using Clock = std::chrono::steady_clock;
  using Pass = TxPass;

  TxPath(ring::TxBackRing ring, hv::GrantTable& table, PacketSink& sink, const TxConfig& config,
         QueueCounters& counters);

  Pass process(Clock::time_point now);

  void set_rate(std::uint64_t bytes, std::uint64_t usecs, Clock::time_point now) {
    core_.set_rate(bytes, usecs, now);
  }
  [[nodiscard]] bool rate_limited() const { return core_.rate_limited(); }
  /// RING_FINAL_CHECK_FOR_REQUESTS: true if requests arrived after all (call process()
  /// again); otherwise the frontend will notify on its next request.
  [[nodiscard]] bool final_check() { return core_.ring().final_check_for_requests(); }
  [[nodiscard]] const ring::TxBackRing& ring() const { return core_.ring(); }
  [[nodiscard]] const zerocopy::PendingLimiter& limiter() const { return core_.limiter(); }
  [[nodiscard]] const zerocopy::MapChooser& map_chooser() const { return core_.map_chooser(); }

  /// Switch mode: receivers are done with these zerocopy packets; answers their slots and
  /// returns whether the frontend must be notified. Unknown tokens are ignored.
  bool complete_switched(std::span<const QueueLink::TxDone> done) {
    return switch_ && switch_->complete(core_, done);
  }

 private:
  TxCore core_;
  std::optional<TxToTap> tap_;        // no switch attachment: to the sink
  std::optional<TxToSwitch> switch_;  // a switch attachment: to the switch
};

}  // namespace unetback::vif
