#include "backend/vif/tx_path.hpp"

#include <algorithm>
#include <cstring>

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

void count_copy_reason(QueueCounters& c, zerocopy::CopyReason r) {
  switch (r) {
    case zerocopy::CopyReason::size: QueueCounters::add(c.tx_copy_for_size); break;
    case zerocopy::CopyReason::limit: QueueCounters::add(c.tx_copy_for_limit); break;
    case zerocopy::CopyReason::errors: QueueCounters::add(c.tx_copy_for_errors); break;
    case zerocopy::CopyReason::none: break;
  }
}

/// A packet that left the queue (to the TAP or the switch).
void count_sent(QueueCounters& c, const TxPacket& pkt, bool zerocopy) {
  QueueCounters::add(c.tx_packets);
  QueueCounters::add(c.tx_bytes, pkt.total_len);
  QueueCounters::add(c.tx_slots, pkt.ring_slots());
  QueueCounters::add(zerocopy ? c.tx_zerocopy : c.tx_copied);
}

}  // namespace

TxPath::TxPath(ring::TxBackRing ring, hv::GrantTable& table, PacketSink& sink, TxConfig config,
               QueueCounters& counters)
    : ring_(ring),
      table_(table),
      sink_(sink),
      config_(config),
      counters_(counters),
      limiter_(config.zerocopy),
      chooser_(config.map_mode),
      // One buffer per packet of a pass, plus the deferred one.
      pool_(config.max_packets_per_pass + 1) {
  pending_.reserve(config_.max_packets_per_pass);
  segs_.reserve(config_.max_packets_per_pass * (kMaxTxSlots + 2));
  refs_.reserve(config_.max_packets_per_pass * kMaxTxSlots);
  parts_.reserve(config_.max_packets_per_pass * kMaxTxSlots);
  iov_.reserve(kMaxTxSlots + 2);
  sink_results_.reserve(config_.max_packets_per_pass);
  if (config_.sw) {
    held_.resize(config_.zerocopy.ring_size);
    routes_.resize(config_.max_packets_per_pass);
    queries_.resize(config_.max_packets_per_pass);
    copies_ = std::make_shared<SwitchBuffers>();
  }
}

void TxPath::respond(const TxPacket& pkt, std::int16_t status) {
  // make_tx_response: the first request's id, a NULL response per extra, then each frag.
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

void TxPath::copy_counted(std::span<hv::GrantCopySegment> segs) {
  if (segs.empty()) return;
  const auto before = table_.copy_stats();
  table_.copy(segs);
  QueueCounters::add(counters_.tx_copy_segments, segs.size());
  QueueCounters::add(counters_.tx_copy_calls, table_.copy_stats().calls - before.calls);
}

void TxPath::add_copy_segments(Pending& p, std::uint32_t from_byte) {
  // Copies bytes [from_byte, total) of the packet into its buffer, slot by slot; each slot
  // lies within one granted page (offset + size <= 4096 was checked), so one segment each.
  std::byte* frame = pool_.frame(p.buf);
  std::uint32_t pos = 0;
  for (std::uint32_t i = 0; i < p.pkt.nr_slots; ++i) {
    const TxSlot& s = p.pkt.slots[i];
    const std::uint32_t end = pos + s.size;
    if (end > from_byte && s.size != 0) {
      const std::uint32_t skip = from_byte > pos ? from_byte - pos : 0;
      hv::GrantCopySegment seg;
      seg.source = hv::GrantCopyPtr::granted(config_.frontend, s.gref,
                                             static_cast<std::uint16_t>(s.offset + skip));
      seg.dest = hv::GrantCopyPtr::local(frame + pos + skip);
      seg.len = static_cast<std::uint16_t>(s.size - skip);
      segs_.push_back(seg);
    }
    pos = end;
  }
}

void TxPath::stage(TxPacket&& pkt) {
  Pending p;
  p.pkt = std::move(pkt);
  p.buf = pool_.take();
  const auto verdict = limiter_.decide(p.pkt.total_len);
  count_copy_reason(counters_, verdict.reason);
  if (verdict.decision == zerocopy::Decision::zerocopy) {
    if (!pass_maps_) pass_maps_ = chooser_.map_this_pass();
    pass_mappable_bytes_ += p.pkt.total_len;
    if (!*pass_maps_) {
      QueueCounters::add(counters_.tx_copy_for_cost);
    } else if (auto t = limiter_.begin()) {
      p.zerocopy = true;
      p.token = *t;
    }
  }
  p.seg_begin = static_cast<std::uint32_t>(segs_.size());
  if (!p.zerocopy) {
    add_copy_segments(p, 0);
  } else {
    // The linear part: the first bytes gathered across however many slots hold them.
    p.linear_len = std::min(p.pkt.total_len, kTxLinearLen);
    std::byte* frame = pool_.frame(p.buf);
    std::uint32_t pos = 0;
    p.part_begin = static_cast<std::uint32_t>(parts_.size());
    for (std::uint32_t i = 0; i < p.pkt.nr_slots; ++i) {
      const TxSlot& s = p.pkt.slots[i];
      if (s.size == 0) continue;
      const std::uint32_t linear_here =
          pos < p.linear_len ? std::min<std::uint32_t>(s.size, p.linear_len - pos) : 0;
      if (linear_here != 0) {
        hv::GrantCopySegment seg;
        seg.source = hv::GrantCopyPtr::granted(config_.frontend, s.gref, s.offset);
        seg.dest = hv::GrantCopyPtr::local(frame + pos);
        seg.len = static_cast<std::uint16_t>(linear_here);
        segs_.push_back(seg);
      }
      if (linear_here < s.size) {
        parts_.push_back(SlotPart{static_cast<std::uint32_t>(refs_.size()),
                                  static_cast<std::uint16_t>(s.offset + linear_here),
                                  static_cast<std::uint16_t>(s.size - linear_here)});
        refs_.push_back(s.gref);
      }
      pos += s.size;
    }
    p.part_end = static_cast<std::uint32_t>(parts_.size());
  }
  p.seg_end = static_cast<std::uint32_t>(segs_.size());
  pending_.push_back(std::move(p));
}

TxPath::Pass TxPath::process(Clock::time_point now) {
  Pass pass;
  if (ring_.request_prod_overflow()) {
    // netback: "Impossible number of requests" -> the frontend is malicious.
    pass.fatal = true;
    pass.fatal_reason = TxError::chain_past_available;
    QueueCounters::add(counters_.tx_fatal);
    return pass;
  }
  pending_.clear();
  segs_.clear();
  refs_.clear();
  parts_.clear();
  pass_maps_.reset();  // every pass asks the chooser afresh (also after a fatal return)
  pass_mappable_bytes_ = 0;

  while (pending_.size() < config_.max_packets_per_pass) {
    // zerocopy-fallback=0 (pre-2017 vhost, seed 000): at the pending limit TX stops, whatever
    // the next packet is, until a receiver gives zerocopy buffers back. Every packet of the
    // pass may still go zerocopy, so the pass takes no more than the limit leaves.
    if (config_.sw && !config_.zerocopy.fallback &&
        limiter_.in_flight() + pending_.size() >= limiter_.limit()) {
      pass.stalled = true;
      QueueCounters::add(counters_.tx_stalls);
      break;
    }
    TxPacket pkt;
    if (deferred_) {
      pkt = *deferred_;
      deferred_.reset();
    } else {
      if (ring_.unconsumed_requests() == 0) break;
      pkt = parse_tx_packet(ring_, config_.limits);
    }
    switch (pkt.verdict) {
      case TxVerdict::fatal:
        pass.fatal = true;
        pass.fatal_reason = pkt.error;
        QueueCounters::add(counters_.tx_fatal);
        // The packets taken before it still go their queue's way (a switched one holds only
        // its headers so far: never to the TAP).
        if (config_.sw) {
          finish_switched(pass, now);
        } else {
          finish_pass(pass);
        }
        return pass;
      case TxVerdict::drop:
        count_drop(counters_, pkt.error);
        respond(pkt, static_cast<std::int16_t>(wire::RspStatus::error));
        continue;
      case TxVerdict::mcast: {
        // netback: an add past XEN_NETBK_MCAST_MAX is refused (ERROR), a delete always OKAY.
        QueueCounters::add(counters_.tx_mcast_requests);
        bool ok = true;
        if (config_.mcast && pkt.mcast) {
          const std::span<const std::uint8_t, 6> mac(pkt.mcast->addr);
          if (pkt.mcast->add) {
            ok = config_.mcast->add(mac);
            if (!ok) QueueCounters::add(counters_.tx_mcast_refused);
          } else {
            config_.mcast->remove(mac);
          }
        }
        respond(pkt,
                static_cast<std::int16_t>(ok ? wire::RspStatus::okay : wire::RspStatus::error));
        continue;
      }
      case TxVerdict::ok: break;
    }
    // Rate limit: the packet is parsed (its slots consumed) but waits for credit.
    if (!credit_.try_take(pkt.total_len, now)) {
      pass.retry_at = credit_.retry_at(pkt.total_len, now);
      deferred_ = std::move(pkt);
      QueueCounters::add(counters_.tx_rate_limited);
      break;
    }
    if (config_.sw) {
      stage_switched(std::move(pkt));
    } else {
      stage(std::move(pkt));
    }
  }
  pass.more = !pass.retry_at && !pass.stalled && pending_.size() == config_.max_packets_per_pass &&
              ring_.unconsumed_requests() > 0;
  if (config_.sw) {
    finish_switched(pass, now);
  } else {
    finish_pass(pass);
    // The pass's cost, from the caller's `now` (taken just before the call) to here: what
    // the chooser compares between mapping and copying.
    if (pass_maps_ && pass_mappable_bytes_ != 0) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - now);
      chooser_.record(*pass_maps_, pass_mappable_bytes_,
                      static_cast<std::uint64_t>(std::max<std::int64_t>(ns.count(), 0)));
    }
  }
  return pass;
}

void TxPath::finish_pass(Pass& pass) {
  copy_counted(segs_);
  hv::MappedGrants mapped;
  if (!refs_.empty()) {
    auto m = table_.map(config_.frontend, refs_, hv::Access::read_only);
    if (m) {
      mapped = std::move(*m);
    } else {
      // All-or-nothing: one bad ref fails the pass's mapping. Those packets fall back to a
      // plain copy of their remaining bytes (a zerocopy error for the limiter).
      QueueCounters::add(counters_.tx_map_failures);
      const std::size_t first_fallback_seg = segs_.size();
      for (Pending& p : pending_) {
        if (!p.zerocopy) continue;
        p.zerocopy = false;
        (void)limiter_.complete(*p.token, false);
        p.token.reset();
        p.fallback_begin = static_cast<std::uint32_t>(segs_.size());
        add_copy_segments(p, p.linear_len);
        p.fallback_end = static_cast<std::uint32_t>(segs_.size());
      }
      std::span<hv::GrantCopySegment> extra(segs_.data() + first_fallback_seg,
                                            segs_.size() - first_fallback_seg);
      if (!extra.empty()) table_.copy(extra);
      QueueCounters::add(counters_.tx_copy_segments, extra.size());
    }
  }
  for (Pending& p : pending_) deliver(p, mapped.empty() ? nullptr : &mapped);
  flush_sink();    // the sink reads the mapped pages until here
  mapped.reset();  // unmapped before the responses tell the guest its pages are free
  push_and_recycle(pass);
}

void TxPath::push_and_recycle(Pass& pass) {
  pass.packets = static_cast<std::uint32_t>(pending_.size());
  if (ring_.rsp_prod_pvt() != RingIdx{ring_.indices().rsp_prod}) {
    pass.notify = ring_.push_responses();
    QueueCounters::add(pass.notify ? counters_.tx_notify_sent : counters_.tx_notify_suppressed);
  }
  for (Pending& p : pending_) pool_.give_back(p.buf);
  pending_.clear();
}

void TxPath::deliver(Pending& p, const hv::MappedGrants* mapped) {
  const TxPacket& pkt = p.pkt;
  bool ok = true;
  for (std::uint32_t i = p.seg_begin; i < p.seg_end && ok; ++i) ok = segs_[i].status == GNTST_okay;
  for (std::uint32_t i = p.fallback_begin; i < p.fallback_end && ok; ++i)
    ok = segs_[i].status == GNTST_okay;
  if (!ok) {
    QueueCounters::add(counters_.tx_drop_copy_error);
    if (p.token) (void)limiter_.complete(*p.token, false);
    respond(pkt, static_cast<std::int16_t>(wire::RspStatus::error));
    return;
  }

  std::byte* frame = pool_.frame(p.buf);
  // Copied packets (including map fallbacks) lie whole in the buffer.
  const std::uint32_t head_len = p.zerocopy ? p.linear_len : pkt.total_len;
  net::GuestTxOffload offload{pkt.flags, std::nullopt};
  if (pkt.gso) offload.gso = net::GsoInfo{pkt.gso->type, pkt.gso->size};
  auto hdr = net::prepare_guest_tx(offload, std::span(frame, head_len), pkt.total_len);
  std::error_code sink_error;
  if (!hdr) {
    QueueCounters::add(counters_.tx_drop_offload);
  } else {
    iov_.clear();
    iov_.push_back(iovec{frame, head_len});
    if (p.zerocopy) {
      for (std::uint32_t i = p.part_begin; i < p.part_end; ++i) {
        const SlotPart& part = parts_[i];
        iov_.push_back(iovec{mapped->page(part.map_index) + part.offset, part.len});
      }
    }
    sink_error = sink_.deliver(*hdr, iov_);
    if (sink_error) {
      QueueCounters::add(counters_.tx_drop_sink);
    } else {
      p.in_sink = true;
    }
  }
  for (std::uint32_t i = 1; i < pkt.nr_slots; ++i)
    if (pkt.slots[i].size == 0) QueueCounters::add(counters_.tx_zero_size_slots);
  if (p.token) (void)limiter_.complete(*p.token, true);
  // The guest's slots were read successfully: OKAY, whatever the host side did with the
  // frame (netback answers by grant-op status too).
  respond(pkt, static_cast<std::int16_t>(wire::RspStatus::okay));
}

void TxPath::flush_sink() {
  std::size_t n = 0;
  for (const Pending& p : pending_) n += p.in_sink ? 1 : 0;
  if (n == 0) return;
  sink_results_.assign(n, std::error_code{});
  sink_.flush(sink_results_);
  std::size_t i = 0;
  for (Pending& p : pending_) {
    if (!std::exchange(p.in_sink, false)) continue;
    if (sink_results_[i++]) {
      QueueCounters::add(counters_.tx_drop_sink);
    } else {
      count_sent(counters_, p.pkt, p.zerocopy);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Switch mode

void TxPath::stage_switched(TxPacket&& pkt) {
  // Only the headers are copied now: the destination (and so zerocopy or copy) is known once
  // the switch has seen the MACs.
  Pending p;
  p.pkt = std::move(pkt);
  p.buf = pool_.take();
  p.linear_len = std::min(p.pkt.total_len, kTxLinearLen);
  std::byte* frame = pool_.frame(p.buf);
  p.seg_begin = static_cast<std::uint32_t>(segs_.size());
  std::uint32_t pos = 0;
  for (std::uint32_t i = 0; i < p.pkt.nr_slots && pos < p.linear_len; ++i) {
    const TxSlot& s = p.pkt.slots[i];
    if (s.size == 0) continue;
    hv::GrantCopySegment seg;
    seg.source = hv::GrantCopyPtr::granted(config_.frontend, s.gref, s.offset);
    seg.dest = hv::GrantCopyPtr::local(frame + pos);
    seg.len = static_cast<std::uint16_t>(std::min<std::uint32_t>(s.size, p.linear_len - pos));
    segs_.push_back(seg);
    pos += s.size;
  }
  p.seg_end = static_cast<std::uint32_t>(segs_.size());
  pending_.push_back(std::move(p));
}

bool TxPath::forward_zerocopy(Pending& p, const net::VirtioNetHdr& vh, const SwitchPort& to,
                              std::uint32_t hash) {
  const TxPacket& pkt = p.pkt;
  auto off =
      net::map_tap_rx(vh, to.offloads, std::span(pool_.frame(p.buf), p.linear_len), pkt.total_len);
  // A receiver that cannot take a partial checksum needs the bytes here: copy instead.
  if (!off || off->complete_checksum || to.queues.empty()) return false;
  const auto verdict = limiter_.decide(pkt.total_len);
  count_copy_reason(counters_, verdict.reason);
  if (verdict.decision != zerocopy::Decision::zerocopy) return false;
  auto token = limiter_.begin();
  if (!token) return false;
  RxPacket rp;
  for (std::uint32_t i = 0; i < pkt.nr_slots; ++i) {
    const TxSlot& s = pkt.slots[i];
    if (s.size == 0) continue;  // XSA-448: never data
    rp.frags[rp.nr_frags++] =
        RxFrag{hv::GrantCopyPtr::granted(config_.frontend, s.gref, s.offset), s.size};
  }
  rp.len = pkt.total_len;
  rp.offload = *off;
  rp.source_alive = config_.sw->alive;
  // Run by the receiver once its copy from our grants is done (or the packet dropped).
  rp.release = RxRelease(
      [](void* link, std::uintptr_t idx) noexcept {
        static_cast<QueueLink*>(link)->tx_done(
            QueueLink::TxDone{static_cast<std::uint16_t>(idx), true});
      },
      config_.sw->self.get(), token->index(), config_.sw->self);
  Held& h = held_[token->index() % held_.size()];
  h.pkt = pkt;
  h.token = *token;
  p.fate = Pending::Fate::held;
  count_sent(counters_, pkt, true);
  QueueCounters::add(counters_.tx_switched);
  (void)to.queues[hash % to.queues.size()]->deliver(std::move(rp));
  return true;
}

std::byte* TxPath::copy_out(std::span<const std::byte> bytes, int& buf,
                            std::shared_ptr<std::byte[]>& heap) {
  buf = bytes.size() <= PacketPool::kMaxFrame ? copies_->take() : -1;
  std::byte* to = nullptr;
  if (buf >= 0) {
    to = copies_->data(buf);
  } else {
    QueueCounters::add(counters_.tx_switch_heap);
    heap.reset(new std::byte[bytes.size()]);
    to = heap.get();
  }
  std::memcpy(to, bytes.data(), bytes.size());
  return to;
}

void TxPath::forward_copied(Pending& p, const net::VirtioNetHdr& vh, const VSwitch::Route& route,
                            std::uint32_t hash) {
  const TxPacket& pkt = p.pkt;
  std::byte* frame = pool_.frame(p.buf);
  const std::span<std::byte> bytes(frame, pkt.total_len);
  if (route.uplink) {
    const iovec iov{frame, pkt.total_len};
    if (config_.sw->sw->send_uplink(vh, std::span(&iov, 1))) {
      QueueCounters::add(counters_.tx_switch_uplink);
    } else {
      QueueCounters::add(counters_.tx_drop_sink);
    }
  }
  // One copy in backend memory for every receiver that takes the packet as it is, from the
  // queue's recycled buffers (the heap only while every one of them is still read).
  int shared = -1;
  std::shared_ptr<std::byte[]> shared_heap;
  std::byte* shared_bytes = nullptr;
  for (const auto& to : route.guests) {
    if (to->queues.empty()) continue;
    auto off = net::map_tap_rx(vh, to->offloads, bytes, bytes.size());
    if (!off) {
      QueueCounters::add(counters_.tx_drop_offload);
      continue;
    }
    RxPacket rp;
    if (off->complete_checksum) {
      // This receiver cannot take a partial checksum: its own copy, completed.
      int own = -1;
      std::shared_ptr<std::byte[]> heap;
      std::byte* mine = copy_out(bytes, own, heap);
      std::array<std::span<std::byte>, 1> parts{std::span(mine, bytes.size())};
      if (net::complete_checksum(parts, off->csum_start, off->csum_offset)) {
        if (own >= 0) copies_->unref(own);
        QueueCounters::add(counters_.tx_drop_offload);
        continue;
      }
      rp.frags[0] = RxFrag{hv::GrantCopyPtr::local(mine), pkt.total_len};
      if (own >= 0) {
        rp.release = copies_->share(copies_, own);
        copies_->unref(own);
      } else {
        rp.release = RxRelease::holding(std::move(heap));
      }
    } else {
      if (shared_bytes == nullptr) shared_bytes = copy_out(bytes, shared, shared_heap);
      rp.frags[0] = RxFrag{hv::GrantCopyPtr::local(shared_bytes), pkt.total_len};
      rp.release = shared >= 0 ? copies_->share(copies_, shared) : RxRelease::holding(shared_heap);
    }
    rp.nr_frags = 1;
    rp.len = pkt.total_len;
    rp.offload = *off;
    QueueCounters::add(counters_.tx_switched);
    (void)to->queues[hash % to->queues.size()]->deliver(std::move(rp));
  }
  if (shared >= 0) copies_->unref(shared);
  count_sent(counters_, pkt, false);
}

void TxPath::finish_switched(Pass& pass, Clock::time_point now) {
  // 1. The headers of the whole pass, in one copy call.
  copy_counted(segs_);
  const auto okay = static_cast<std::int16_t>(wire::RspStatus::okay);
  // 2. Each packet's headers checked, its MACs read.
  const std::size_t rest_begin = segs_.size();
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    const TxPacket& pkt = p.pkt;
    for (std::uint32_t k = 1; k < pkt.nr_slots; ++k)
      if (pkt.slots[k].size == 0) QueueCounters::add(counters_.tx_zero_size_slots);
    bool ok = true;
    for (std::uint32_t k = p.seg_begin; k < p.seg_end && ok; ++k)
      ok = segs_[k].status == GNTST_okay;
    if (!ok) {
      QueueCounters::add(counters_.tx_drop_copy_error);
      respond(pkt, static_cast<std::int16_t>(wire::RspStatus::error));
      p.fate = Pending::Fate::answered;
      continue;
    }
    const std::span<std::byte> head(pool_.frame(p.buf), p.linear_len);
    net::GuestTxOffload offload{pkt.flags, std::nullopt};
    if (pkt.gso) offload.gso = net::GsoInfo{pkt.gso->type, pkt.gso->size};
    auto vh = net::prepare_guest_tx(offload, head, pkt.total_len);
    if (!vh) {
      QueueCounters::add(counters_.tx_drop_offload);
      respond(pkt, okay);
      p.fate = Pending::Fate::answered;
      continue;
    }
    p.vh = *vh;
    p.hash = flow_hash(head);
    RouteQuery& q = queries_[i];
    for (std::size_t k = 0; k < 6; ++k) {
      q.dst.octets[k] = static_cast<std::uint8_t>(head[k]);
      q.src.octets[k] = static_cast<std::uint8_t>(head[6 + k]);
    }
    // A source MAC not the vif's own would take over another port's MAC (issue 15): dropped
    // before the switch learns from it, and answered OKAY as a host-side filter would.
    const auto& allow = config_.sw->allow_spoofing;
    if (config_.sw->guest_mac && q.src != *config_.sw->guest_mac &&
        !(allow && allow->load(std::memory_order_relaxed))) {
      QueueCounters::add(counters_.tx_dropped_spoofed);
      respond(pkt, okay);
      p.fate = Pending::Fate::answered;
      continue;
    }
  }
  // 3. The whole pass routed under one acquisition of the switch's lock.
  for (std::size_t i = 0; i < pending_.size(); ++i)
    queries_[i].skip = pending_[i].fate == Pending::Fate::answered;
  config_.sw->sw->route_pass(config_.sw->port, std::span(queries_.data(), pending_.size()), now,
                             std::span(routes_.data(), pending_.size()));
  // 4. Zerocopy where the limiter lets us, the rest queued for one copy.
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (p.fate == Pending::Fate::answered) continue;
    const TxPacket& pkt = p.pkt;
    VSwitch::Route& route = routes_[i];
    if (route.flooded) QueueCounters::add(counters_.tx_switch_flooded);
    if (route.guests.empty() && !route.uplink) {
      QueueCounters::add(counters_.tx_switch_dropped);
      respond(pkt, okay);
      p.fate = Pending::Fate::answered;
      continue;
    }
    // A receiver whose RX queue is full would drop the packet: it is dropped here, before
    // any copy or held grant (seed 000: copies past the pending limit, dropped at the
    // receiver's cap, starved the sender's other flows). The uplink still gets it.
    std::erase_if(route.guests, [&](const std::shared_ptr<const SwitchPort>& to) {
      return !to->queues.empty() && to->queues[p.hash % to->queues.size()]->full(pkt.total_len);
    });
    if (route.guests.empty() && !route.uplink) {
      QueueCounters::add(counters_.tx_switch_full);
      respond(pkt, okay);
      p.fate = Pending::Fate::answered;
      continue;
    }
    // Zerocopy only for one guest receiver: the grants are read once, by that receiver.
    if (route.guests.size() == 1 && !route.uplink &&
        forward_zerocopy(p, p.vh, *route.guests.front(), p.hash)) {
      continue;
    }
    p.fate = Pending::Fate::copy;
    p.fallback_begin = static_cast<std::uint32_t>(segs_.size());
    add_copy_segments(p, p.linear_len);
    p.fallback_end = static_cast<std::uint32_t>(segs_.size());
  }
  // 5. The copied packets' remaining bytes, in one call; then to their receivers, answered.
  std::span<hv::GrantCopySegment> rest(segs_.data() + rest_begin, segs_.size() - rest_begin);
  copy_counted(rest);
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (p.fate != Pending::Fate::copy) continue;
    bool ok = true;
    for (std::uint32_t k = p.fallback_begin; k < p.fallback_end && ok; ++k)
      ok = segs_[k].status == GNTST_okay;
    if (!ok) {
      QueueCounters::add(counters_.tx_drop_copy_error);
      respond(p.pkt, static_cast<std::int16_t>(wire::RspStatus::error));
      continue;
    }
    forward_copied(p, p.vh, routes_[i], p.hash);
    respond(p.pkt, okay);
  }
  for (std::size_t i = 0; i < pending_.size(); ++i) routes_[i].clear();
  push_and_recycle(pass);
}

bool TxPath::complete_switched(std::span<const QueueLink::TxDone> done) {
  bool any = false;
  for (const auto& d : done) {
    if (held_.empty()) break;
    Held& h = held_[d.token % held_.size()];
    if (!h.pkt || !h.token || h.token->index() != d.token) continue;
    // The receiver's copy read our grants (or the packet was dropped on its way): the slots
    // are the guest's again. OKAY either way, as netback answers a zerocopy skb's slots.
    respond(*h.pkt, static_cast<std::int16_t>(wire::RspStatus::okay));
    (void)limiter_.complete(*h.token, d.delivered);
    h.pkt.reset();
    h.token.reset();
    any = true;
  }
  if (!any) return false;
  const bool notify = ring_.push_responses();
  QueueCounters::add(notify ? counters_.tx_notify_sent : counters_.tx_notify_suppressed);
  return notify;
}

}  // namespace unetback::vif
