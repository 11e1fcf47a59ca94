#include "backend/vif/tx_to_switch.hpp"

#include <algorithm>
#include <cstring>

namespace unetback::vif {

TxToSwitch::TxToSwitch(const TxConfig& config)
    : held_(config.zerocopy.ring_size),
      routes_(config.max_packets_per_pass),
      queries_(config.max_packets_per_pass),
      copies_(std::make_shared<SwitchBuffers>()) {
  packets_.reserve(config.max_packets_per_pass);
  // What the switch floods to this vif passes the filter this vif's MCAST_ADD/DEL extras amend
  // (each queue of the vif names the same one).
  if (config.sw && config.sw->sw && config.mcast)
    config.sw->sw->set_rx_filter(config.sw->port, config.mcast);
}

void TxToSwitch::stage(TxCore& core, const TxPacket& pkt) {
  TxPending& p = core.add_pending(pkt);
  packets_.emplace_back();
  p.linear_len = std::min(p.pkt.total_len, kTxLinearLen);
  core.gather_header(p, [](const TxSlot&, std::uint32_t) {});
  p.seg_end = static_cast<std::uint32_t>(core.segs().size());
}

bool TxToSwitch::forward_zerocopy(TxCore& core, TxPending& p, const Packet& t,
                                  const SwitchPort& to) {
  const TxPacket& pkt = p.pkt;
  const auto& sw = *core.config().sw;
  auto off =
      net::map_tap_rx(t.vh, to.offloads, std::span(core.frame(p), p.linear_len), pkt.total_len);
  // A receiver that cannot take a partial checksum needs the bytes here: copy instead.
  if (!off || off->complete_checksum || to.queues.empty()) return false;
  auto& limiter = core.limiter();
  const auto verdict = limiter.decide(pkt.total_len);
  core.count_copy_reason(verdict.reason);
  if (verdict.decision != zerocopy::Decision::zerocopy) return false;
  auto token = limiter.begin();
  if (!token) return false;
  RxPacket rp;
  for (std::uint32_t i = 0; i < pkt.nr_slots; ++i) {
    const TxSlot& s = pkt.slots[i];
    if (s.size == 0) continue;  // XSA-448: never data
    rp.frags[rp.nr_frags++] =
        RxFrag{hv::GrantCopyPtr::granted(core.config().frontend, s.gref, s.offset), s.size};
  }
  rp.len = pkt.total_len;
  rp.offload = *off;
  rp.source_alive = sw.alive;
  // Run by the receiver once its copy from our grants is done (or the packet dropped).
  rp.release = RxRelease(
      [](void* link, std::uintptr_t idx) noexcept {
        static_cast<QueueLink*>(link)->tx_done(
            QueueLink::TxDone{static_cast<std::uint16_t>(idx), true});
      },
      sw.self.get(), token->index(), sw.self);
  Held& h = held_[token->index() % held_.size()];
  h.pkt = pkt;
  h.token = *token;
  core.count_sent(pkt, true);
  QueueCounters::add(core.counters().tx_switched);
  (void)to.queues[t.hash % to.queues.size()]->deliver(std::move(rp));
  return true;
}

std::byte* TxToSwitch::copy_out(TxCore& core, std::span<const std::byte> bytes, int& buf,
                                std::shared_ptr<std::byte[]>& heap) {
  buf = bytes.size() <= PacketPool::kMaxFrame ? copies_->take() : -1;
  std::byte* to = nullptr;
  if (buf >= 0) {
    to = copies_->data(buf);
  } else {
    QueueCounters::add(core.counters().tx_switch_heap);
    heap.reset(new std::byte[bytes.size()]);
    to = heap.get();
  }
  std::memcpy(to, bytes.data(), bytes.size());
  return to;
}

void TxToSwitch::forward_copied(TxCore& core, TxPending& p, const Packet& t,
                                const VSwitch::Route& route) {
  const TxPacket& pkt = p.pkt;
  auto& counters = core.counters();
  std::byte* frame = core.frame(p);
  const std::span<std::byte> bytes(frame, pkt.total_len);
  if (route.uplink) {
    const iovec iov{frame, pkt.total_len};
    if (core.config().sw->sw->send_uplink(t.vh, std::span(&iov, 1))) {
      QueueCounters::add(counters.tx_switch_uplink);
    } else {
      QueueCounters::add(counters.tx_drop_sink);
    }
  }
  // One copy in backend memory for every receiver that takes the packet as it is, from the
  // queue's recycled buffers (the heap only while every one of them is still read).
  int shared = -1;
  std::shared_ptr<std::byte[]> shared_heap;
  std::byte* shared_bytes = nullptr;
  for (const auto& to : route.guests) {
    if (to->queues.empty()) continue;
    auto off = net::map_tap_rx(t.vh, to->offloads, bytes, bytes.size());
    if (!off) {
      QueueCounters::add(counters.tx_drop_offload);
      continue;
    }
    RxPacket rp;
    if (off->complete_checksum) {
      // This receiver cannot take a partial checksum: its own copy, completed.
      int own = -1;
      std::shared_ptr<std::byte[]> heap;
      std::byte* mine = copy_out(core, bytes, own, heap);
      std::array<std::span<std::byte>, 1> parts{std::span(mine, bytes.size())};
      if (net::complete_checksum(parts, off->csum_start, off->csum_offset)) {
        if (own >= 0) copies_->unref(own);
        QueueCounters::add(counters.tx_drop_offload);
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
      if (shared_bytes == nullptr) shared_bytes = copy_out(core, bytes, shared, shared_heap);
      rp.frags[0] = RxFrag{hv::GrantCopyPtr::local(shared_bytes), pkt.total_len};
      rp.release = shared >= 0 ? copies_->share(copies_, shared) : RxRelease::holding(shared_heap);
    }
    rp.nr_frags = 1;
    rp.len = pkt.total_len;
    rp.offload = *off;
    QueueCounters::add(counters.tx_switched);
    (void)to->queues[t.hash % to->queues.size()]->deliver(std::move(rp));
  }
  if (shared >= 0) copies_->unref(shared);
  core.count_sent(pkt, false);
}

bool TxToSwitch::check_headers(TxCore& core, std::size_t i) {
  TxPending& p = core.pending()[i];
  Packet& t = packets_[i];
  const TxPacket& pkt = p.pkt;
  core.count_zero_size_slots(pkt);
  if (!core.segments_ok(p)) {
    core.drop_copy_error(pkt);
    return false;
  }
  const std::span<std::byte> head(core.frame(p), p.linear_len);
  auto vh = core.guest_header(pkt, head, pkt.total_len);
  if (!vh) {
    core.respond_okay(pkt);
    return false;
  }
  t.vh = *vh;
  t.hash = flow_hash(head);
  RouteQuery& q = queries_[i];
  for (std::size_t k = 0; k < 6; ++k) {
    q.dst.octets[k] = static_cast<std::uint8_t>(head[k]);
    q.src.octets[k] = static_cast<std::uint8_t>(head[6 + k]);
  }
  // A source MAC not the vif's own would take over another port's MAC (issue 15): dropped
  // before the switch learns from it, and answered OKAY as a host-side filter would.
  const auto& sw = *core.config().sw;
  if (sw.guest_mac && q.src != *sw.guest_mac &&
      !(sw.allow_spoofing && sw.allow_spoofing->load(std::memory_order_relaxed))) {
    QueueCounters::add(core.counters().tx_dropped_spoofed);
    core.respond_okay(pkt);
    return false;
  }
  return true;
}

void TxToSwitch::finish(TxCore& core, TxPass& pass, TxCore::Clock::time_point now) {
  auto& segs = core.segs();
  auto& pending = core.pending();
  auto& counters = core.counters();
  const auto& sw = *core.config().sw;
  // 1. The headers of the whole pass, in one copy call.
  core.copy_counted(segs);
  // 2. Each packet's headers checked, its MACs read.
  const std::size_t rest_begin = segs.size();
  for (std::size_t i = 0; i < pending.size(); ++i)
    if (!check_headers(core, i)) packets_[i].fate = Packet::Fate::answered;
  // 3. The whole pass routed under one acquisition of the switch's lock.
  for (std::size_t i = 0; i < pending.size(); ++i)
    queries_[i].skip = packets_[i].fate == Packet::Fate::answered;
  sw.sw->route_pass(sw.port, std::span(queries_.data(), pending.size()), now,
                    std::span(routes_.data(), pending.size()));
  // 4. Zerocopy where the limiter lets us, the rest queued for one copy.
  for (std::size_t i = 0; i < pending.size(); ++i) {
    TxPending& p = pending[i];
    Packet& t = packets_[i];
    if (t.fate == Packet::Fate::answered) continue;
    const TxPacket& pkt = p.pkt;
    VSwitch::Route& route = routes_[i];
    if (route.flooded) QueueCounters::add(counters.tx_switch_flooded);
    route.count_filtered(t.hash);
    if (route.guests.empty() && !route.uplink) {
      QueueCounters::add(counters.tx_switch_dropped);
      core.respond_okay(pkt);
      t.fate = Packet::Fate::answered;
      continue;
    }
    // A receiver whose RX queue is full would drop the packet: it is dropped here, before
    // any copy or held grant (seed 000: copies past the pending limit, dropped at the
    // receiver's cap, starved the sender's other flows). The uplink still gets it.
    std::erase_if(route.guests, [&](const std::shared_ptr<const SwitchPort>& to) {
      return !to->queues.empty() && to->queues[t.hash % to->queues.size()]->full(pkt.total_len);
    });
    if (route.guests.empty() && !route.uplink) {
      QueueCounters::add(counters.tx_switch_full);
      core.respond_okay(pkt);
      t.fate = Packet::Fate::answered;
      continue;
    }
    // Zerocopy only for one guest receiver: the grants are read once, by that receiver.
    if (route.guests.size() == 1 && !route.uplink &&
        forward_zerocopy(core, p, t, *route.guests.front())) {
      t.fate = Packet::Fate::held;
      continue;
    }
    t.fate = Packet::Fate::copy;
    p.fallback_begin = static_cast<std::uint32_t>(segs.size());
    core.add_copy_segments(p, p.linear_len);
    p.fallback_end = static_cast<std::uint32_t>(segs.size());
  }
  // 5. The copied packets' remaining bytes, in one call; then to their receivers, answered.
  std::span<hv::GrantCopySegment> rest(segs.data() + rest_begin, segs.size() - rest_begin);
  core.copy_counted(rest);
  for (std::size_t i = 0; i < pending.size(); ++i) {
    TxPending& p = pending[i];
    if (packets_[i].fate != Packet::Fate::copy) continue;
    if (!core.segments_ok(p)) {
      core.drop_copy_error(p.pkt);
      continue;
    }
    forward_copied(core, p, packets_[i], routes_[i]);
    core.respond_okay(p.pkt);
  }
  for (std::size_t i = 0; i < pending.size(); ++i) routes_[i].clear();
  core.push_and_recycle(pass);
}

bool TxToSwitch::complete(TxCore& core, std::span<const QueueLink::TxDone> done) {
  bool any = false;
  for (const auto& d : done) {
    if (held_.empty()) break;
    Held& h = held_[d.token % held_.size()];
    if (!h.pkt || !h.token || h.token->index() != d.token) continue;
    // The receiver's copy read our grants (or the packet was dropped on its way): the slots
    // are the guest's again. OKAY either way, as netback answers a zerocopy skb's slots.
    core.respond_okay(*h.pkt);
    (void)core.limiter().complete(*h.token, d.delivered);
    h.pkt.reset();
    h.token.reset();
    any = true;
  }
  if (!any) return false;
  return core.push_responses();
}

}  // namespace unetback::vif
