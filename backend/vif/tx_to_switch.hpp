// TxToSwitch: the TxPath engine that delivers guest TX to an internal switch (VSwitch).
//
// Only the headers are grant-copied at first: the destination (and so zerocopy or copy) is
// known once the switch has seen the MACs. A unicast packet to one guest goes zerocopy, as
// grant refs the receiver copies from, when the PendingLimiter allows; its slots are answered
// when the receiver reports it done (complete()). The others are copied into backend memory,
// once for every receiver that takes them as they are.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/vif/tx_core.hpp"

namespace unetback::vif {

class TxToSwitch {
 public:
  explicit TxToSwitch(const TxConfig& config);

  void begin_pass() { packets_.clear(); }
  /// Queues the header copy of one parsed packet of verdict ok.
  void stage(TxCore& core, const TxPacket& pkt);
  /// Routes the pass, forwards every packet (zerocopy or copied), answers those not held.
  void finish(TxCore& core, TxPass& pass, TxCore::Clock::time_point now);
  /// Receivers are done with these zerocopy packets; answers their slots and returns whether
  /// the frontend must be notified. Unknown tokens are ignored.
  bool complete(TxCore& core, std::span<const QueueLink::TxDone> done);

 private:
  struct Packet {  // the switch's side of core.pending()[i]
    // What became of the packet after the header copy.
    enum class Fate : std::uint8_t { undecided, answered, held, copy } fate = Fate::undecided;
    net::VirtioNetHdr vh{};
    std::uint32_t hash = 0;
  };
  /// Reads the headers of packet i; false (the packet answered) when it goes no further.
  bool check_headers(TxCore& core, std::size_t i);
  bool forward_zerocopy(TxCore& core, TxPending& p, const Packet& t, const SwitchPort& to);
  void forward_copied(TxCore& core, TxPending& p, const Packet& t, const VSwitch::Route& route);
  /// A copy of `bytes` in one of copies_' buffers (`buf`, holding our reference), or on the
  /// heap (`heap`) while every buffer is still read by some receiver.
  std::byte* copy_out(TxCore& core, std::span<const std::byte> bytes, int& buf,
                      std::shared_ptr<std::byte[]>& heap);

  // Zerocopy packets waiting for their receiver, by token index (ring-size slots).
  struct Held {
    std::optional<TxPacket> pkt;
    std::optional<zerocopy::Token> token;
  };
  std::vector<Held> held_;
  std::vector<Packet> packets_;            // per pending packet of the pass
  std::vector<VSwitch::Route> routes_;     // per pending packet of the pass
  std::vector<RouteQuery> queries_;        // per pending packet of the pass
  std::shared_ptr<SwitchBuffers> copies_;  // copied packets' bytes
};

}  // namespace unetback::vif
