// TxToTap: the TxPath engine that delivers guest TX to a PacketSink (the vif's TAP).
//
// The PendingLimiter chooses per packet between zerocopy (the first bytes grant-copied into a
// linear header, the rest of each slot grant-mapped and handed to the sink straight from the
// guest's pages) and copy (the whole packet grant-copied into backend memory); the MapChooser
// (tx-map) may copy a pass's zerocopy packets too, when copying measures cheaper on this
// host. All copies of a pass go in one GrantTable::copy, all maps in one GrantTable::map.
#pragma once

#include <optional>
#include <vector>

#include "backend/vif/packet_sink.hpp"
#include "backend/vif/tx_core.hpp"

namespace unetback::vif {

class TxToTap {
 public:
  TxToTap(PacketSink& sink, const TxConfig& config);

  /// Forgets the previous pass's maps; every pass asks the chooser afresh.
  void begin_pass();
  /// Handles one parsed packet of verdict ok: queues its copy segments (and map refs).
  void stage(TxCore& core, const TxPacket& pkt);
  /// Copies and maps the pass, hands its frames to the sink, answers every packet.
  void finish(TxCore& core, TxPass& pass);
  /// The pass's cost, from its first packet that could be mapped to now, if the chooser asked
  /// for this pass to be timed: what it compares between mapping and copying.
  void record_cost(TxCore& core);

 private:
  struct SlotPart {           // a piece of a data slot that is mapped (zerocopy)
    std::uint32_t map_index;  // page index in this pass's mapping
    std::uint16_t offset;     // in that page
    std::uint16_t len;
  };
  struct Packet {  // the TAP's side of core.pending()[i]
    bool zerocopy = false;
    std::optional<zerocopy::Token> token;
    std::uint32_t part_begin = 0, part_end = 0;  // its mapped parts in parts_
    bool in_sink = false;  // taken by the sink: its outcome comes with the sink's flush
  };

  static TxCore::Clock::time_point pass_clock(const TxCore& core);
  void deliver(TxCore& core, TxPending& p, Packet& t, const hv::MappedGrants* mapped);
  /// Completes the frames the sink took this pass and counts each one sent or dropped.
  void flush_sink(TxCore& core);

  PacketSink& sink_;
  std::optional<bool> pass_maps_;  // this pass's MapChooser answer, once asked
  std::optional<TxCore::Clock::time_point> pass_started_;  // a timed pass: when it was asked
  std::uint64_t pass_mappable_bytes_ = 0;  // bytes of this pass's packets that could be mapped
  std::vector<Packet> packets_;            // per pending packet of the pass
  std::vector<GrantRef> refs_;
  std::vector<SlotPart> parts_;
  std::vector<iovec> iov_;
  std::vector<std::error_code> sink_results_;
};

}  // namespace unetback::vif
