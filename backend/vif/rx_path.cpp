#include "backend/vif/rx_path.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace unetback::vif {
namespace {

constexpr std::uint32_t kMaxSlotsPerPacket = 64;
constexpr std::size_t kMaxChunksPerPacket = 128;

std::uint32_t extras_for(const RxPacket& p) {
  return (p.offload.gso ? 1u : 0u) + (p.hash ? 1u : 0u);
}

}  // namespace

RxPath::RxPath(ring::RxBackRing ring, hv::GrantTable& table, RxConfig config,
               QueueCounters& counters)
    : ring_(ring),
      table_(table),
      config_(std::move(config)),
      counters_(counters),
      // The batch holds several calls' worth (the table splits it into calls of copy_batch
      // segments) and always at least one whole packet's chunks.
      batch_(table, std::max<std::size_t>(4 * config_.copy_batch, kMaxChunksPerPacket)) {
  plan_.chunks.reserve(64);
  plan_.slot_bytes.reserve(32);
  awaiting_flush_.reserve(config_.max_packets_per_pass);
  if (config_.backlog) config_.backlog->cap.store(config_.queue_bytes, std::memory_order_relaxed);
}

RxPath::~RxPath() {
  // Nothing queued may keep another party's buffer (or TX slots) forever.
  flush();
  queue_.remove_if([](RxPacket& p) {
    if (p.release) p.release();
    return true;
  });
  set_queued_bytes(0);
}

bool RxPath::enqueue(RxPacket&& p, Clock::time_point now) {
  auto reject = [&](std::atomic<std::uint64_t>& why) {
    QueueCounters::add(why);
    if (p.release) p.release();
    return false;
  };
  if (!config_.sg && p.len > wire::kPageSize) return reject(counters_.rx_dropped_too_big);
  // XSA-392: a hard byte cap, whatever the frontend does with its ring.
  if (queued_bytes_ + p.len > config_.queue_bytes && !queue_.empty())
    return reject(counters_.rx_dropped_queue_full);
  p.expires = now + config_.drain_timeout;
  set_queued_bytes(queued_bytes_ + p.len);
  queue_.push_back(std::move(p));
  return true;
}

void RxPath::count_filtered_by_senders() {
  // One relaxed load per pass; the exchange only when a sender left something out.
  if (!config_.backlog || config_.backlog->mcast_filtered.load(std::memory_order_relaxed) == 0)
    return;
  QueueCounters::add(counters_.rx_dropped_mcast_filter,
                     config_.backlog->mcast_filtered.exchange(0, std::memory_order_relaxed));
}

void RxPath::drop_head(std::atomic<std::uint64_t>& reason) {
  RxPacket& p = queue_.front();
  QueueCounters::add(reason);
  set_queued_bytes(queued_bytes_ - p.len);
  if (p.release) p.release();
  queue_.pop_front();
}

RxPath::Pass RxPath::process(Clock::time_point now) {
  Pass pass;
  count_filtered_by_senders();
  while (!queue_.empty() && pass.packets < config_.max_packets_per_pass) {
    RxPacket& head = queue_.front();
    if (head.source_alive && !head.source_alive->load(std::memory_order_acquire)) {
      drop_head(counters_.rx_dropped_source_gone);
      continue;
    }
    plan_rx_slots(std::span(head.frags.data(), head.nr_frags), config_.coalesce, plan_,
                  config_.xdp_headroom);
    if (!config_.sg && plan_.nr_slots() > 1) {
      drop_head(counters_.rx_dropped_too_big);
      continue;
    }
    const std::uint32_t needed = plan_.nr_slots() + extras_for(head);
    if (needed > kMaxSlotsPerPacket || plan_.chunks.size() > kMaxChunksPerPacket) {
      drop_head(counters_.rx_dropped_too_big);  // only a pathological legacy layout gets here
      continue;
    }
    if (!ring_.requests_available(needed)) {
      pass.waiting_for_slots = true;
      QueueCounters::add(counters_.rx_waits_for_slots);
      if (!short_of_slots_since_) short_of_slots_since_ = now;
      break;
    }
    short_of_slots_since_.reset();
    if (batch_.room() < plan_.chunks.size()) flush();
    deliver_head();
    ++pass.packets;
  }
  // What the ring had room for went out; a head packet still waiting for slots past its time
  // goes now (a packet whose slots are there is delivered, however long it waited: a
  // frontend without feature-rx-notify is only looked at every drain timeout).
  if (pass.waiting_for_slots) {
    bool dropped = false;
    while (!queue_.empty() && queue_.front().expires <= now) {
      drop_head(counters_.rx_dropped_expired);
      dropped = true;
    }
    if (dropped) pass.waiting_for_slots = false;  // the new head has not been tried yet
  }
  if (queue_.empty()) short_of_slots_since_.reset();
  flush();
  if (pass.packets > 0) {
    config_.recorder.published(ring_.rsp_prod_pvt());
    pass.notify = ring_.push_responses();
    QueueCounters::add(pass.notify ? counters_.rx_notify_sent : counters_.rx_notify_suppressed);
  }
  return pass;
}

void RxPath::deliver_head() {
  RxPacket p = std::move(queue_.front());
  queue_.pop_front();
  set_queued_bytes(queued_bytes_ - p.len);

  const std::uint32_t nr_slots = plan_.nr_slots();
  const std::uint32_t extras = extras_for(p);
  const RingIdx first = ring_.req_cons();
  std::array<wire::RxRequest, kMaxSlotsPerPacket> reqs{};
  // Slot 0 is data (it holds the headers); the extra follows it; then the other data slots.
  // Response i sits at request i's ring index (netfront ignores ids when extras are present).
  const std::uint32_t total = nr_slots + extras;
  for (std::uint32_t i = 0; i < total; ++i) {
    reqs[i] = ring_.take_request();
    config_.recorder.consumed(first + i, reqs[i].id);
  }
  // Before the responses below overwrite these slots.
  config_.recorder.consumed_upto(ring_.req_cons());

  auto ring_index_of_data_slot = [&](std::uint32_t slot) {
    return first + (slot == 0 ? 0 : slot + extras);
  };
  for (const RxChunk& c : plan_.chunks) {
    const std::uint32_t pos = c.slot == 0 ? 0 : c.slot + extras;
    hv::GrantCopySegment seg;
    seg.source = c.src;
    seg.dest = hv::GrantCopyPtr::granted(config_.frontend, GrantRef{reqs[pos].gref}, c.dest_off);
    seg.len = c.len;
    batch_.add(seg, ring_index_of_data_slot(c.slot).value());
  }
  for (std::uint32_t slot = 0; slot < nr_slots; ++slot) {
    const RingIdx at = ring_index_of_data_slot(slot);
    wire::RxResponse rsp{};
    rsp.id = reqs[at.since(first)].id;
    // Slot 0's data starts after the frontend's XDP headroom. (Linux netback writes offset 0
    // with a status that counts the headroom, plus an XDP extra whose headroom Linux netfront
    // takes as the offset; netif.h's offset field says the same without the extra slot.)
    rsp.offset = slot == 0 ? plan_.first_offset : 0;
    wire::RxFlags flags;
    if (slot + 1 < nr_slots) flags |= wire::RxFlag::more_data;
    if (slot == 0) {
      flags |= p.offload.flags.without(wire::RxFlag::more_data).without(wire::RxFlag::extra_info);
      if (extras != 0) flags |= wire::RxFlag::extra_info;
    }
    rsp.flags = flags.raw();
    rsp.status = static_cast<std::int16_t>(plan_.slot_bytes[slot]);
    rsp_shadow_[at.value() & (ring::RxBackRing::kSize - 1)] = rsp;
    ring_.write_response_at(at, rsp);
  }
  // The extras follow slot 0 in type order (GSO, then HASH), chained with FLAG_MORE.
  RingIdx extra_at = first + 1;
  if (p.offload.gso) {
    wire::ExtraInfo gso{};
    gso.type = XEN_NETIF_EXTRA_TYPE_GSO;
    gso.flags = p.hash ? XEN_NETIF_EXTRA_FLAG_MORE : 0;
    gso.u.gso.size = p.offload.gso->size;
    gso.u.gso.type = static_cast<std::uint8_t>(p.offload.gso->type);
    gso.u.gso.pad = 0;
    gso.u.gso.features = 0;
    ring_.write_response_at(extra_at, gso);
    ++extra_at;
    QueueCounters::add(counters_.rx_extras);
  }
  if (p.hash) {
    // netif.h XEN_NETIF_EXTRA_TYPE_HASH: the type's bit number, the algorithm, the value in
    // the frontend's byte order (netback stores the u32 as it is).
    wire::ExtraInfo h{};
    h.type = XEN_NETIF_EXTRA_TYPE_HASH;
    h.flags = 0;
    h.u.hash.type = p.hash->type;
    h.u.hash.algorithm = XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ;
    std::memcpy(h.u.hash.value, &p.hash->value, sizeof(h.u.hash.value));
    ring_.write_response_at(extra_at, h);
    QueueCounters::add(counters_.rx_extras);
    QueueCounters::add(counters_.rx_hash_extras);
  }
  ring_.advance_responses(total);

  QueueCounters::add(counters_.rx_packets);
  QueueCounters::add(counters_.rx_bytes, p.len);
  QueueCounters::add(counters_.rx_slots, total);
  QueueCounters::add(counters_.rx_min_slots, rx_data_slots(p.len, plan_.first_offset) + extras);
  // Linux netfront takes at most MAX_SKB_FRAGS + 1 = 18 data slots per packet (and drops the
  // packet past that): only the legacy layout ever gets here.
  if (nr_slots > wire::kNrSlotsMin) QueueCounters::add(counters_.rx_over_18_slots);
  if (p.release) awaiting_flush_.push_back(std::move(p.release));
}

void RxPath::flush() {
  if (batch_.empty()) {
    for (auto& r : awaiting_flush_) r();
    awaiting_flush_.clear();
    return;
  }
  const auto before = table_.copy_stats();
  QueueCounters::add(counters_.rx_copy_segments, batch_.size());
  const std::size_t failed = batch_.flush([&](std::uint32_t ring_index, std::int16_t status) {
    // The slot's response carries the (negative) GNTST status instead of a length: the
    // frontend drops the packet; nothing aborts (XSA-362).
    auto& rsp = rsp_shadow_[ring_index & (ring::RxBackRing::kSize - 1)];
    rsp.status = status;
    ring_.write_response_at(RingIdx{ring_index}, rsp);
  });
  QueueCounters::add(counters_.rx_copy_errors, failed);
  const auto after = table_.copy_stats();
  QueueCounters::add(counters_.rx_copy_calls, after.calls - before.calls);
  QueueCounters::add(counters_.rx_copy_ops, after.ops - before.ops);
  QueueCounters::add(counters_.rx_copy_hypercalls, after.hypercalls - before.hypercalls);
  // The copies that read these packets are done: their buffers may be reused.
  for (auto& r : awaiting_flush_) r();
  awaiting_flush_.clear();
}

std::size_t RxPath::purge_dead_sources() {
  return queue_.remove_if([&](RxPacket& p) {
    if (!p.source_alive || p.source_alive->load(std::memory_order_acquire)) return false;
    QueueCounters::add(counters_.rx_dropped_source_gone);
    set_queued_bytes(queued_bytes_ - p.len);
    if (p.release) p.release();
    return true;
  });
}

bool RxPath::update_carrier(Clock::time_point now) {
  const bool stalled = config_.stall_detection && short_of_slots_since_ &&
                       now - *short_of_slots_since_ >= config_.stall_timeout;
  if (stalled && carrier_) {
    carrier_ = false;
    QueueCounters::add(counters_.rx_stalls);
  } else if (!short_of_slots_since_ && !carrier_) {
    carrier_ = true;
  }
  return carrier_;
}

}  // namespace unetback::vif
