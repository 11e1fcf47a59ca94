#include "backend/vif/tx_to_tap.hpp"

#include <algorithm>

namespace unetback::vif {

TxToTap::TxToTap(PacketSink& sink, const TxConfig& config) : sink_(sink) {
  packets_.reserve(config.max_packets_per_pass);
  refs_.reserve(std::size_t{config.max_packets_per_pass} * kMaxTxSlots);
  parts_.reserve(std::size_t{config.max_packets_per_pass} * kMaxTxSlots);
  iov_.reserve(kMaxTxSlots + 2);
  sink_results_.reserve(config.max_packets_per_pass);
}

void TxToTap::begin_pass() {
  packets_.clear();
  refs_.clear();
  parts_.clear();
  pass_maps_.reset();
  pass_started_.reset();
  pass_mappable_bytes_ = 0;
}

void TxToTap::stage(TxCore& core, const TxPacket& pkt) {
  TxPending& p = core.add_pending(pkt);
  Packet& t = packets_.emplace_back();
  auto& limiter = core.limiter();
  const auto verdict = limiter.decide(p.pkt.total_len);
  core.count_copy_reason(verdict.reason);
  if (verdict.decision == zerocopy::Decision::zerocopy) {
    if (!pass_maps_) {
      pass_maps_ = core.map_chooser().map_this_pass();
      if (core.map_chooser().time_this_pass()) pass_started_ = pass_clock(core);
    }
    pass_mappable_bytes_ += p.pkt.total_len;
    if (!*pass_maps_) {
      QueueCounters::add(core.counters().tx_copy_for_cost);
    } else if (auto token = limiter.begin()) {
      t.zerocopy = true;
      t.token = *token;
    }
  }
  if (!t.zerocopy) {
    core.add_copy_segments(p, 0);
  } else {
    // The linear part copied, the rest of each slot mapped.
    p.linear_len = std::min(p.pkt.total_len, kTxLinearLen);
    t.part_begin = static_cast<std::uint32_t>(parts_.size());
    core.gather_header(p, [&](const TxSlot& s, std::uint32_t linear_here) {
      parts_.push_back(SlotPart{static_cast<std::uint32_t>(refs_.size()),
                                static_cast<std::uint16_t>(s.offset + linear_here),
                                static_cast<std::uint16_t>(s.size - linear_here)});
      refs_.push_back(s.gref);
    });
    t.part_end = static_cast<std::uint32_t>(parts_.size());
  }
  p.seg_end = static_cast<std::uint32_t>(core.segs().size());
}

void TxToTap::finish(TxCore& core, TxPass& pass) {
  auto& segs = core.segs();
  core.copy_counted(segs);
  hv::MappedGrants mapped;
  if (!refs_.empty()) {
    auto m = core.table().map(core.config().frontend, refs_, hv::Access::read_only);
    if (m) {
      mapped = std::move(*m);
    } else {
      // All-or-nothing: one bad ref fails the pass's mapping. Those packets fall back to a
      // plain copy of their remaining bytes (a zerocopy error for the limiter).
      QueueCounters::add(core.counters().tx_map_failures);
      const std::size_t first_fallback_seg = segs.size();
      for (std::size_t i = 0; i < packets_.size(); ++i) {
        Packet& t = packets_[i];
        if (!t.zerocopy) continue;
        TxPending& p = core.pending()[i];
        t.zerocopy = false;
        (void)core.limiter().complete(*t.token, false);
        t.token.reset();
        p.fallback_begin = static_cast<std::uint32_t>(segs.size());
        core.add_copy_segments(p, p.linear_len);
        p.fallback_end = static_cast<std::uint32_t>(segs.size());
      }
      std::span<hv::GrantCopySegment> extra(segs.data() + first_fallback_seg,
                                            segs.size() - first_fallback_seg);
      core.copy_counted(extra);
    }
  }
  for (std::size_t i = 0; i < packets_.size(); ++i)
    deliver(core, core.pending()[i], packets_[i], mapped.empty() ? nullptr : &mapped);
  flush_sink(core);  // the sink reads the mapped pages until here
  mapped.reset();    // unmapped before the responses tell the guest its pages are free
  core.push_and_recycle(pass);
}

TxCore::Clock::time_point TxToTap::pass_clock(const TxCore& core) {
  const auto& clock = core.config().pass_clock;
  return clock ? clock() : TxCore::Clock::now();
}

void TxToTap::record_cost(TxCore& core) {
  if (!pass_maps_ || !pass_started_ || pass_mappable_bytes_ == 0) return;
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(pass_clock(core) - *pass_started_);
  core.map_chooser().record(*pass_maps_, pass_mappable_bytes_,
                            static_cast<std::uint64_t>(std::max<std::int64_t>(ns.count(), 0)));
}

void TxToTap::deliver(TxCore& core, TxPending& p, Packet& t, const hv::MappedGrants* mapped) {
  const TxPacket& pkt = p.pkt;
  if (!core.segments_ok(p)) {
    if (t.token) (void)core.limiter().complete(*t.token, false);
    core.drop_copy_error(pkt);
    return;
  }
  std::byte* frame = core.frame(p);
  // Copied packets (including map fallbacks) lie whole in the buffer.
  const std::uint32_t head_len = t.zerocopy ? p.linear_len : pkt.total_len;
  if (auto hdr = core.guest_header(pkt, std::span(frame, head_len), pkt.total_len)) {
    iov_.clear();
    iov_.push_back(iovec{frame, head_len});
    if (t.zerocopy) {
      for (std::uint32_t i = t.part_begin; i < t.part_end; ++i) {
        const SlotPart& part = parts_[i];
        iov_.push_back(iovec{mapped->page(part.map_index) + part.offset, part.len});
      }
    }
    if (sink_.deliver(*hdr, iov_)) {
      QueueCounters::add(core.counters().tx_drop_sink);
    } else {
      t.in_sink = true;
    }
  }
  core.count_zero_size_slots(pkt);
  if (t.token) (void)core.limiter().complete(*t.token, true);
  // The guest's slots were read successfully: OKAY, whatever the host side did with the
  // frame (netback answers by grant-op status too).
  core.respond_okay(pkt);
}

void TxToTap::flush_sink(TxCore& core) {
  std::size_t n = 0;
  for (const Packet& t : packets_) n += t.in_sink ? 1 : 0;
  if (n == 0) return;
  sink_results_.assign(n, std::error_code{});
  sink_.flush(sink_results_);
  std::size_t k = 0;
  for (std::size_t i = 0; i < packets_.size(); ++i) {
    if (!std::exchange(packets_[i].in_sink, false)) continue;
    if (sink_results_[k++]) {
      QueueCounters::add(core.counters().tx_drop_sink);
    } else {
      core.count_sent(core.pending()[i].pkt, packets_[i].zerocopy);
    }
  }
}

}  // namespace unetback::vif
