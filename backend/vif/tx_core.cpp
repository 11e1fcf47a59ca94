#include "backend/vif/tx_core.hpp"

#include <algorithm>

namespace unetback::vif {
namespace {

void count_drop(QueueCounters& c, TxError e) {
  switch (e) {
    case TxError::too_many_slots: QueueCounters::add(c.tx_drop_too_many_slots); break;
    case TxError::frag_larger_than_rest: QueueCounters::add(c.tx_drop_frag_size); break;
    case TxError::runt_first_slot: QueueCounters::add(c.tx_drop_runt); break;
    case TxError::bad_gso: QueueCounters::add(c.tx_drop_bad_gso); break;
    default: break;
  }
}

}  // namespace

TxCore::TxCore(ring::TxBackRing ring, hv::GrantTable& table, const TxConfig& config,
               QueueCounters& counters)
    : ring_(ring),
      table_(table),
      config_(config),
      counters_(counters),
      limiter_(config.zerocopy),
      chooser_(config.map_mode),
      // One buffer per packet of a pass, plus the deferred one.
      pool_(config.max_packets_per_pass + 1) {
  pending_.reserve(config_.max_packets_per_pass);
  segs_.reserve(std::size_t{config_.max_packets_per_pass} * (kMaxTxSlots + 2));
}

bool TxCore::begin_pass(TxPass& pass) {
  if (ring_.request_prod_overflow()) {
    // netback: "Impossible number of requests" -> the frontend is malicious.
    pass.fatal = true;
    pass.fatal_reason = TxError::chain_past_available;
    QueueCounters::add(counters_.tx_fatal);
    return false;
  }
  pending_.clear();
  segs_.clear();
  return true;
}

TxCore::Next TxCore::next_packet(TxPass& pass, Clock::time_point now, TxPacket& out) {
  const auto done = [&] {
    pass.more = !pass.retry_at && !pass.stalled &&
                pending_.size() == config_.max_packets_per_pass && ring_.unconsumed_requests() > 0;
    return Next::done;
  };
  while (pending_.size() < config_.max_packets_per_pass) {
    // zerocopy-fallback=0 (pre-2017 vhost, seed 000): at the pending limit TX stops, whatever
    // the next packet is, until a receiver gives zerocopy buffers back. Every packet of the
    // pass may still go zerocopy, so the pass takes no more than the limit leaves.
    if (config_.sw && !config_.zerocopy.fallback &&
        limiter_.in_flight() + pending_.size() >= limiter_.limit()) {
      pass.stalled = true;
      QueueCounters::add(counters_.tx_stalls);
      return done();
    }
    if (deferred_) {
      out = *deferred_;
      deferred_.reset();
    } else {
      if (ring_.unconsumed_requests() == 0) return done();
      const RingIdx first = ring_.req_cons();
      out = parse_tx_packet(ring_, config_.limits);
      out.first_index = first;
      // Before any response can overwrite these slots (a fatal one takes the vif down).
      if (out.verdict != TxVerdict::fatal) config_.recorder.consumed(first, out);
    }
    switch (out.verdict) {
      case TxVerdict::fatal:
        pass.fatal = true;
        pass.fatal_reason = out.error;
        QueueCounters::add(counters_.tx_fatal);
        return Next::fatal;
      case TxVerdict::drop:
        count_drop(counters_, out.error);
        respond(out, static_cast<std::int16_t>(wire::RspStatus::error));
        continue;
      case TxVerdict::mcast: {
        // netback: an add past XEN_NETBK_MCAST_MAX is refused (ERROR), a delete always OKAY.
        QueueCounters::add(counters_.tx_mcast_requests);
        bool ok = true;
        if (config_.mcast && out.mcast) {
          const std::span<const std::uint8_t, 6> mac(out.mcast->addr);
          if (out.mcast->add) {
            ok = config_.mcast->add(mac);
            if (!ok) QueueCounters::add(counters_.tx_mcast_refused);
          } else {
            config_.mcast->remove(mac);
          }
        }
        respond(out,
                static_cast<std::int16_t>(ok ? wire::RspStatus::okay : wire::RspStatus::error));
        continue;
      }
      case TxVerdict::ok: break;
    }
    // Rate limit: the packet is parsed (its slots consumed) but waits for credit.
    if (!credit_.try_take(out.total_len, now)) {
      pass.retry_at = credit_.retry_at(out.total_len, now);
      deferred_ = out;
      QueueCounters::add(counters_.tx_rate_limited);
      return done();
    }
    return Next::packet;
  }
  return done();
}

TxPending& TxCore::add_pending(const TxPacket& pkt) {
  TxPending& p = pending_.emplace_back();
  p.pkt = pkt;
  p.buf = pool_.take();
  p.seg_begin = static_cast<std::uint32_t>(segs_.size());
  return p;
}

void TxCore::add_copy_segments(TxPending& p, std::uint32_t from_byte) {
  // Copies bytes [from_byte, total) of the packet into its buffer, slot by slot; each slot
  // lies within one granted page (offset + size <= 4096 was checked), so one segment each.
  std::byte* at = frame(p);
  std::uint32_t pos = 0;
  for (std::uint32_t i = 0; i < p.pkt.nr_slots; ++i) {
    const TxSlot& s = p.pkt.slots[i];
    const std::uint32_t end = pos + s.size;
    if (end > from_byte && s.size != 0) {
      const std::uint32_t skip = from_byte > pos ? from_byte - pos : 0;
      hv::GrantCopySegment seg;
      seg.source = hv::GrantCopyPtr::granted(config_.frontend, s.gref,
                                             static_cast<std::uint16_t>(s.offset + skip));
      seg.dest = hv::GrantCopyPtr::local(at + pos + skip);
      seg.len = static_cast<std::uint16_t>(s.size - skip);
      segs_.push_back(seg);
    }
    pos = end;
  }
}

void TxCore::copy_counted(std::span<hv::GrantCopySegment> segs) {
  if (segs.empty()) return;
  const auto before = table_.copy_stats();
  table_.copy(segs);
  QueueCounters::add(counters_.tx_copy_segments, segs.size());
  const auto after = table_.copy_stats();
  QueueCounters::add(counters_.tx_copy_calls, after.calls - before.calls);
  QueueCounters::add(counters_.tx_copy_ops, after.ops - before.ops);
  QueueCounters::add(counters_.tx_copy_hypercalls, after.hypercalls - before.hypercalls);
}

bool TxCore::segments_ok(const TxPending& p) const {
  bool ok = true;
  for (std::uint32_t i = p.seg_begin; i < p.seg_end && ok; ++i) ok = segs_[i].status == GNTST_okay;
  for (std::uint32_t i = p.fallback_begin; i < p.fallback_end && ok; ++i)
    ok = segs_[i].status == GNTST_okay;
  return ok;
}

void TxCore::drop_copy_error(const TxPacket& pkt) {
  QueueCounters::add(counters_.tx_drop_copy_error);
  respond(pkt, static_cast<std::int16_t>(wire::RspStatus::error));
}

std::optional<net::VirtioNetHdr> TxCore::guest_header(const TxPacket& pkt,
                                                      std::span<std::byte> head,
                                                      std::uint32_t frame_len) {
  net::GuestTxOffload offload{pkt.flags, std::nullopt};
  if (pkt.gso) offload.gso = net::GsoInfo{pkt.gso->type, pkt.gso->size};
  auto hdr = net::prepare_guest_tx(offload, head, frame_len);
  if (!hdr) {
    QueueCounters::add(counters_.tx_drop_offload);
    return std::nullopt;
  }
  return *hdr;
}

void TxCore::count_zero_size_slots(const TxPacket& pkt) {
  for (std::uint32_t i = 1; i < pkt.nr_slots; ++i)
    if (pkt.slots[i].size == 0) QueueCounters::add(counters_.tx_zero_size_slots);
}

void TxCore::count_copy_reason(zerocopy::CopyReason r) {
  switch (r) {
    case zerocopy::CopyReason::size: QueueCounters::add(counters_.tx_copy_for_size); break;
    case zerocopy::CopyReason::limit: QueueCounters::add(counters_.tx_copy_for_limit); break;
    case zerocopy::CopyReason::errors: QueueCounters::add(counters_.tx_copy_for_errors); break;
    case zerocopy::CopyReason::none: break;
  }
}

void TxCore::count_sent(const TxPacket& pkt, bool zerocopy) {
  QueueCounters::add(counters_.tx_packets);
  QueueCounters::add(counters_.tx_bytes, pkt.total_len);
  QueueCounters::add(counters_.tx_slots, pkt.ring_slots());
  QueueCounters::add(zerocopy ? counters_.tx_zerocopy : counters_.tx_copied);
}

void TxCore::respond(const TxPacket& pkt, std::int16_t status) {
  // make_tx_response: the first request's id, a NULL response per extra, then each frag.
  config_.recorder.answered(pkt.first_index, pkt.ring_slots(), ring_.rsp_prod_pvt());
  ring_.put_response(wire::TxResponse{pkt.first_id, status});
  for (std::uint32_t i = 0; i < pkt.nr_extras; ++i)
    ring_.put_response(wire::TxResponse{0, static_cast<std::int16_t>(wire::RspStatus::null)});
  for (std::uint32_t i = 0; i < pkt.nr_frags; ++i) {
    // XSA-448: a zero-size frag is answered OKAY, never turned into data; the others share
    // the packet's fate.
    const bool empty_frag = pkt.verdict == TxVerdict::ok && pkt.slots[1 + i].size == 0;
    ring_.put_response(wire::TxResponse{
        pkt.frag_ids[i], empty_frag ? static_cast<std::int16_t>(wire::RspStatus::okay) : status});
  }
}

void TxCore::push_and_recycle(TxPass& pass) {
  pass.packets = static_cast<std::uint32_t>(pending_.size());
  if (ring_.rsp_prod_pvt() != RingIdx{ring_.indices().rsp_prod}) pass.notify = push_responses();
  for (TxPending& p : pending_) pool_.give_back(p.buf);
  pending_.clear();
}

bool TxCore::push_responses() {
  config_.recorder.published(ring_.rsp_prod_pvt());
  const bool notify = ring_.push_responses();
  QueueCounters::add(notify ? counters_.tx_notify_sent : counters_.tx_notify_suppressed);
  return notify;
}

}  // namespace unetback::vif
