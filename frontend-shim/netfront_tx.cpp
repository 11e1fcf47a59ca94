// NetfrontQueue's TX half: a frame into TX requests (copied into the queue's copy pages, or
// sent from its own pool pages), the extras, and the responses that free the ids and pages.
#include <algorithm>
#include <cstring>

#include "common/util/log.hpp"
#include "frontend-shim/netfront_queue.hpp"

namespace unetback::netfront {

std::error_code NetfrontQueue::check_meta(const TxMeta& meta) const {
  if (broken_) return std::make_error_code(std::errc::io_error);
  if (meta.gso) {
    // A GSO extra only for a type the backend advertised (and only with SG, as Linux).
    const bool ok = (meta.gso->type == wire::GsoType::tcpv4 && setup_.tx_gso_tcpv4) ||
                    (meta.gso->type == wire::GsoType::tcpv6 && setup_.tx_gso_tcpv6);
    if (!ok || meta.gso->size == 0) return std::make_error_code(std::errc::not_supported);
  }
  return {};
}

bool NetfrontQueue::room_for(std::uint32_t data_slots, const TxMeta& meta, bool linux_stop) const {
  const std::uint32_t needed =
      data_slots + (meta.gso ? 1 : 0) + (meta.mcast ? 1 : 0) + (meta.hash ? 1 : 0);
  const std::uint32_t free = tx_->free_requests();
  // Netfront keeps its queue stopped below 19 free slots (the largest packet + its extra).
  if (linux_stop && free < kTxStopThreshold) return false;
  return free >= needed && free_ids_.size() >= data_slots && !free_packets_.empty();
}

Result<TxSendInfo> NetfrontQueue::send(std::span<const std::byte> frame, const TxMeta& meta) {
  if (auto ec = check_meta(meta)) return ec;
  auto plan = plan_tx_slots(frame.size(), setup_.tx_headroom, setup_.tx_sg);
  if (!plan) return plan.error();
  if (!room_for(plan->count, meta, true)) {
    ++stats_.tx_busy;
    return std::errc::resource_unavailable_try_again;
  }
  const zerocopy::Verdict v = limiter_.decide(frame.size());
  if (v.decision == zerocopy::Decision::stall) {
    ++stats_.tx_busy;
    return std::errc::resource_unavailable_try_again;
  }
  if (v.decision == zerocopy::Decision::zerocopy) {
    // A linear frame in our own memory: it is staged in granted pages of the pool and
    // sent from there, as a frame read straight into a TxBuffer would be.
    auto buffer = alloc_tx_buffer(frame.size());
    if (buffer) {
      buffer->write(0, frame);
      return post_zerocopy(*buffer, meta);
    }
  }
  const std::span<const std::byte> pieces[] = {frame};
  return post_copy(pieces, frame.size(), meta);
}

Result<TxBuffer> NetfrontQueue::alloc_tx_buffer(std::size_t len) {
  if (broken_) return std::errc::io_error;
  auto plan = plan_tx_slots(len, setup_.tx_headroom, setup_.tx_sg);
  if (!plan) return plan.error();
  if (free_pool_.size() < plan->count) return std::errc::resource_unavailable_try_again;
  TxBuffer b;
  b.queue_ = weak_from_this();
  b.plan_ = *plan;
  b.len_ = len;
  for (std::uint32_t i = 0; i < plan->count; ++i) {
    const std::uint32_t page = free_pool_.back();
    free_pool_.pop_back();
    b.pages_[i] = page;
    b.addrs_[i] = tx_pool_.page(page);
  }
  b.npages_ = plan->count;
  return b;
}

Result<TxSendInfo> NetfrontQueue::send(TxBuffer&& buffer, const TxMeta& meta) {
  if (buffer.queue_.lock().get() != this || buffer.len_ == 0) return std::errc::invalid_argument;
  if (auto ec = check_meta(meta)) return ec;
  TxBuffer b = std::move(buffer);
  if (!room_for(b.plan_.count, meta, true)) {
    ++stats_.tx_busy;
    buffer = std::move(b);  // the caller keeps its frame and may retry
    return std::errc::resource_unavailable_try_again;
  }
  const zerocopy::Verdict v = limiter_.decide(b.len_);
  if (v.decision == zerocopy::Decision::stall) {
    ++stats_.tx_busy;
    buffer = std::move(b);
    return std::errc::resource_unavailable_try_again;
  }
  if (v.decision == zerocopy::Decision::zerocopy) return post_zerocopy(b, meta);
  // Copy: the frame goes into the slots' own pages and the buffer returns at once.
  std::array<std::span<const std::byte>, kMaxTxDataSlots> pieces;
  for (std::size_t i = 0; i < b.segment_count(); ++i) pieces[i] = b.segment(i);
  return post_copy(std::span(pieces.data(), b.segment_count()), b.len_, meta);
}

Result<TxSendInfo> NetfrontQueue::post_copy(std::span<const std::span<const std::byte>> pieces,
                                            std::size_t total, const TxMeta& meta) {
  // Copied frames are packed from offset 0 of each slot's page.
  auto plan = plan_tx_slots(total, 0, setup_.tx_sg);
  if (!plan) return plan.error();
  std::array<OutSlot, kMaxTxDataSlots> out{};
  std::size_t piece = 0, piece_off = 0;
  for (std::uint32_t i = 0; i < plan->count; ++i) {
    const std::uint16_t id = free_ids_.back();
    free_ids_.pop_back();
    std::byte* dst = tx_copy_pages_.page(id) + plan->slots[i].offset;
    std::size_t want = plan->slots[i].size;
    while (want > 0) {
      const std::size_t n = std::min(want, pieces[piece].size() - piece_off);
      std::memcpy(dst, pieces[piece].data() + piece_off, n);
      dst += n;
      want -= n;
      piece_off += n;
      if (piece_off == pieces[piece].size()) {
        ++piece;
        piece_off = 0;
      }
    }
    ids_[id].copy_page = true;
    out[i] = OutSlot{id, tx_copy_pages_.ref(id), plan->slots[i].offset, plan->slots[i].size};
  }
  emit(std::span(out.data(), plan->count), static_cast<std::uint16_t>(total), meta);
  ++stats_.tx_copy;
  return TxSendInfo{plan->count, false};
}

Result<TxSendInfo> NetfrontQueue::post_zerocopy(TxBuffer& b, const TxMeta& meta) {
  auto token = limiter_.begin();
  if (!token) return token.error();
  std::array<OutSlot, kMaxTxDataSlots> out{};
  for (std::uint32_t i = 0; i < b.plan_.count; ++i) {
    const std::uint16_t id = free_ids_.back();
    free_ids_.pop_back();
    ids_[id].copy_page = false;
    out[i] = OutSlot{id, tx_pool_.ref(b.pages_[i]), b.plan_.slots[i].offset, b.plan_.slots[i].size};
  }
  const std::uint32_t count = b.plan_.count;
  emit(std::span(out.data(), count), static_cast<std::uint16_t>(b.len_), meta);
  // The pages now belong to the packet until its last response.
  TxPacketRec& rec = packets_[ids_[out[0].id].packet];
  rec.token = *token;
  rec.pool_pages = b.pages_;
  rec.npool = b.npages_;
  b.npages_ = 0;
  b.release();
  ++stats_.tx_zerocopy;
  return TxSendInfo{count, true};
}

Result<TxSendInfo> NetfrontQueue::send_raw(std::span<const RawTxSlot> slots,
                                           std::span<const std::byte> data, const TxMeta& meta,
                                           std::optional<std::uint16_t> first_size) {
  if (auto ec = check_meta(meta)) return ec;
  if (slots.empty()) return std::errc::invalid_argument;
  std::size_t total = 0;
  for (const RawTxSlot& s : slots) {
    if (std::size_t{s.offset} + s.size > wire::kPageSize) return std::errc::invalid_argument;
    total += s.size;
  }
  if (total != data.size()) return std::errc::invalid_argument;
  if (!first_size && total > wire::kMaxTxSize) return std::errc::message_size;
  const auto count = static_cast<std::uint32_t>(slots.size());
  if (!room_for(count, meta, false)) {
    ++stats_.tx_busy;
    return std::errc::resource_unavailable_try_again;
  }
  std::vector<OutSlot>& out = raw_out_;
  out.clear();
  for (const RawTxSlot& s : slots) {
    const std::uint16_t id = free_ids_.back();
    free_ids_.pop_back();
    // A zero-size slot (a Windows frontend's) copies nothing: data may be empty, its pointer null.
    if (s.size != 0) std::memcpy(tx_copy_pages_.page(id) + s.offset, data.data(), s.size);
    data = data.subspan(s.size);
    ids_[id].copy_page = true;
    out.push_back(OutSlot{id, tx_copy_pages_.ref(id), s.offset, s.size});
  }
  emit(out, first_size.value_or(static_cast<std::uint16_t>(total)), meta);
  ++stats_.tx_copy;
  return TxSendInfo{count, false};
}

void NetfrontQueue::emit(std::span<const OutSlot> slots, std::uint16_t first_size,
                         const TxMeta& meta) {
  const std::uint16_t packet = free_packets_.back();
  free_packets_.pop_back();
  packets_[packet] = TxPacketRec{static_cast<std::uint32_t>(slots.size()), false, {}, {}, 0};
  std::uint32_t bytes = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const OutSlot& s = slots[i];
    ids_[s.id].in_flight = true;
    ids_[s.id].packet = packet;
    wire::TxFlags flags;
    if (i + 1 < slots.size()) flags |= wire::TxFlag::more_data;
    if (i == 0) {
      if (meta.csum_blank) flags |= wire::TxFlag::csum_blank;
      if (meta.data_validated) flags |= wire::TxFlag::data_validated;
      if (meta.gso || meta.mcast || meta.hash) flags |= wire::TxFlag::extra_info;
    }
    wire::TxRequest req{};
    req.gref = s.ref.value();
    req.offset = s.offset;
    req.flags = flags.raw();
    req.id = s.id;
    // netif.h: the first request carries the whole packet's size, the others their own.
    req.size = i == 0 ? first_size : s.size;
    tx_->put_request(req);
    bytes += s.size;
    if (i == 0) emit_extras(meta);
  }
  ++stats_.tx_packets;
  stats_.tx_bytes += bytes;
  stats_.tx_slots += slots.size();
  if (tx_->push_requests()) {
    ++stats_.tx_notify_sent;
    (void)tx_port_.notify();
  } else {
    ++stats_.tx_notify_suppressed;
  }
}

void NetfrontQueue::emit_extras(const TxMeta& meta) {
  // The extras follow the first request (netif.h; backends reject them elsewhere), chained
  // with FLAG_MORE: GSO, MCAST, then HASH.
  std::array<wire::ExtraInfo, 3> extras{};
  std::size_t n = 0;
  if (meta.gso) {
    wire::ExtraInfo& e = extras[n++];
    e.type = static_cast<std::uint8_t>(wire::ExtraType::gso);
    e.u.gso.size = meta.gso->size;
    e.u.gso.type = static_cast<std::uint8_t>(meta.gso->type);
    e.u.gso.pad = 0;
    e.u.gso.features = 0;
  }
  if (meta.mcast) {
    wire::ExtraInfo& e = extras[n++];
    e.type = static_cast<std::uint8_t>(meta.mcast->add ? wire::ExtraType::mcast_add
                                                       : wire::ExtraType::mcast_del);
    std::memcpy(e.u.mcast.addr, meta.mcast->addr.data(), 6);
  }
  if (meta.hash) {
    wire::ExtraInfo& e = extras[n++];
    e.type = static_cast<std::uint8_t>(wire::ExtraType::hash);
    e.u.hash.type = meta.hash->type;
    e.u.hash.algorithm = meta.hash->algorithm;
    std::memcpy(e.u.hash.value, &meta.hash->value, sizeof(e.u.hash.value));
  }
  for (std::size_t k = 0; k < n; ++k) {
    extras[k].flags = k + 1 < n ? XEN_NETIF_EXTRA_FLAG_MORE : 0;
    tx_->put_request_as(extras[k]);
  }
}

void NetfrontQueue::process_tx_responses() {
  if (broken_) return;
  do {
    // XSA-391 hardening: a producer beyond what we asked for is a broken backend.
    const std::uint32_t n = tx_->unconsumed_responses();
    if (tx_->response_prod_overflow() || n > tx_->req_prod_pvt().since(tx_->rsp_cons())) {
      mark_broken("TX response producer overflow");
      return;
    }
    for (std::uint32_t i = 0; i < n; ++i) on_tx_response(tx_->take_response());
  } while (tx_->final_check_for_responses());
  release_held();
}

void NetfrontQueue::on_tx_response(const wire::TxResponse& rsp) {
  if (rsp.status == static_cast<std::int16_t>(wire::RspStatus::null)) return;  // an extra's slot
  // The id is the backend's word: accept only one that is in flight (XSA-396).
  if (rsp.id >= kTxRingSize || !ids_[rsp.id].in_flight) {
    ++stats_.tx_bad_response_id;
    return;
  }
  TxId& slot = ids_[rsp.id];
  slot.in_flight = false;
  TxPacketRec& rec = packets_[slot.packet];
  if (rsp.status != static_cast<std::int16_t>(wire::RspStatus::okay)) {
    rec.failed = true;
    ++stats_.tx_error_responses;
  }
  if (slot.copy_page && grant_held(tx_copy_pages_.ref(rsp.id))) {
    held_ids_.push_back(rsp.id);
    ++stats_.tx_pages_held;
  } else {
    free_ids_.push_back(rsp.id);
  }
  if (--rec.remaining == 0) finish_packet(slot.packet);
}

void NetfrontQueue::finish_packet(std::uint16_t packet) {
  TxPacketRec& rec = packets_[packet];
  if (rec.token) (void)limiter_.complete(*rec.token, !rec.failed);
  for (std::uint32_t page : std::span(rec.pool_pages.data(), rec.npool)) {
    if (grant_held(tx_pool_.ref(page))) {
      held_pool_.push_back(page);
      ++stats_.tx_pages_held;
    } else {
      free_pool_.push_back(page);
    }
  }
  rec = TxPacketRec{};
  free_packets_.push_back(packet);
  ++stats_.tx_completed;
}

void NetfrontQueue::release_held() {
  std::erase_if(held_ids_, [&](std::uint16_t id) {
    if (grant_held(tx_copy_pages_.ref(id))) return false;
    free_ids_.push_back(id);
    return true;
  });
  std::erase_if(held_pool_, [&](std::uint32_t page) {
    if (grant_held(tx_pool_.ref(page))) return false;
    free_pool_.push_back(page);
    return true;
  });
}

void NetfrontQueue::return_pool_pages(std::span<const std::uint32_t> pages) {
  free_pool_.insert(free_pool_.end(), pages.begin(), pages.end());
}

}  // namespace unetback::netfront
