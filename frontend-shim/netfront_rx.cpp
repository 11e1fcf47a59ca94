// NetfrontQueue's RX half: buffers posted to the backend (refilled early), responses parsed and
// checked against what was posted, packets handed to a sink.
#include <algorithm>
#include <cstring>

#include "common/util/log.hpp"
#include "frontend-shim/netfront_queue.hpp"
#include "frontend-shim/rx_refill.hpp"

namespace unetback::netfront {

void NetfrontQueue::post_rx_buffers(std::uint32_t n) {
  for (std::uint32_t i = 0; i < n; ++i) {
    // Request id = ring index (mod ring size), buffer = that id's page: a response at ring
    // index i belongs to the request at index i, whatever its id says.
    const auto slot = static_cast<std::uint16_t>(rx_->req_prod_pvt().value() & (kRxRingSize - 1));
    wire::RxRequest req{};
    req.id = slot;
    req.gref = rx_pages_.ref(slot).value();
    rx_->put_request(req);
  }
  stats_.rx_requests_posted += n;
  const Port port = setup_.split_event_channels ? rx_port_.port() : tx_port_.port();
  // Without feature-rx-notify the backend was told not to count on a kick: it polls.
  if (rx_->push_requests() && setup_.rx_refill_kick) {
    ++stats_.rx_notify_sent;
    (void)channel_->notify(port);
  } else {
    ++stats_.rx_notify_suppressed;
  }
}

void NetfrontQueue::refill_if_due() {
  if (broken_) return;
  const std::uint32_t free = kRxRingSize - rx_posted();
  if (!rx_refill_due(setup_.rx_refill, free, setup_.rx_budget, kRxRingSize)) return;
  post_rx_buffers(free);
  ++stats_.rx_refills;
}

bool NetfrontQueue::take_rx_responses() {
  const std::uint32_t n = rx_->unconsumed_responses();
  if (rx_->response_prod_overflow() || n > rx_->req_prod_pvt().since(rx_->rsp_cons())) {
    mark_broken("RX response producer overflow");
    return false;
  }
  if (n == 0) return true;
  if (rx_tail_ + n > rx_pending_.size()) {
    std::copy(rx_pending_.begin() + rx_head_, rx_pending_.begin() + rx_tail_, rx_pending_.begin());
    rx_tail_ -= rx_head_;
    rx_head_ = 0;
  }
  for (std::uint32_t i = 0; i < n; ++i) rx_pending_[rx_tail_++] = rx_->take_response();
  return true;
}

namespace {

/// poll(std::vector<RxPacket>&): each packet copied out of the pages into its own vector.
class CopyingSink final : public RxSink {
 public:
  explicit CopyingSink(std::vector<RxPacket>& out) : out_(out) {}
  void deliver(const RxView& v) override {
    RxPacket pkt;
    pkt.bytes.reserve(v.bytes);
    for (const std::span<std::byte> seg : v.segments)
      pkt.bytes.insert(pkt.bytes.end(), seg.begin(), seg.end());
    pkt.flags = v.flags;
    pkt.gso = v.gso;
    pkt.hash = v.hash;
    pkt.slots_used = v.slots_used;
    out_.push_back(std::move(pkt));
  }

 private:
  std::vector<RxPacket>& out_;
};

}  // namespace

std::size_t NetfrontQueue::poll(std::vector<RxPacket>& out) {
  CopyingSink sink(out);
  return poll(sink);
}

std::size_t NetfrontQueue::poll(RxSink& sink) {
  std::size_t got = 0;
  std::array<std::span<std::byte>, kMaxRxDataSlots> segs{};
  while (!broken_ && got < setup_.rx_budget) {
    if (!take_rx_responses()) break;
    if (rx_head_ == rx_tail_) {
      if (!rx_->final_check_for_responses()) break;
      continue;
    }
    const std::span<const wire::RxResponse> avail(rx_pending_.data() + rx_head_,
                                                  rx_tail_ - rx_head_);
    RxParse p = parse_rx_packet(avail);
    auto page_of = [&](std::uint32_t pos) {
      return static_cast<std::uint32_t>((rx_processed_ + pos).value() & (kRxRingSize - 1));
    };
    for (std::uint32_t k = 0; k < p.consumed; ++k) {
      if (grant_held(rx_pages_.ref(page_of(k)))) {
        p.drop = RxDrop::grant_in_use;
        mark_broken("RX buffer grant still in use by the backend");
      }
    }
    if (p.drop == RxDrop::none && setup_.rx_checks && !check_rx_packet(p))
      p.drop = RxDrop::out_of_slot;
    if (p.drop == RxDrop::none) {
      // The packet is handed over where the backend put it: its pages are not posted
      // again before the sink's flush() (refill_if_due below).
      for (std::uint32_t s = 0; s < p.segment_count; ++s) {
        const RxSegment& seg = p.segments[s];
        segs[s] = {rx_pages_.page(page_of(seg.slot)) + seg.offset, seg.len};
      }
      RxView view;
      view.segments = std::span(segs.data(), p.segment_count);
      view.bytes = p.bytes;
      view.flags = p.flags;
      view.gso = p.gso;
      view.hash = p.hash;
      view.slots_used = p.consumed;
      ++stats_.rx_packets;
      stats_.rx_bytes += p.bytes;
      stats_.rx_slots += p.consumed;
      sink.deliver(view);
      ++got;
    } else {
      ++stats_.rx_drops[static_cast<std::size_t>(p.drop)];
    }
    rx_head_ += p.consumed;
    rx_processed_ += p.consumed;
    if (rx_head_ == rx_tail_) rx_head_ = rx_tail_ = 0;
  }
  if (got > 0) sink.flush();
  refill_if_due();
  return got;
}

bool NetfrontQueue::check_rx_packet(const RxParse& p) {
  const std::span<const wire::RxResponse> avail(rx_pending_.data() + rx_head_, rx_tail_ - rx_head_);
  auto protocol_error = [&](const std::string& what) {
    ++stats_.rx_protocol_errors;
    static log::RateLimit limit;
    std::uint64_t suppressed = 0;
    if (limit.allow(suppressed)) {
      log::write(log::Level::error, "netfront-q" + std::to_string(setup_.id.value()),
                 "backend protocol error: " + what +
                     (suppressed ? " (" + std::to_string(suppressed) + " suppressed)" : ""));
    }
  };
  ++stats_.rx_slot_checked;
  if (!rx_responses_in_slot(avail, p, rx_processed_.value(), kRxRingSize)) {
    protocol_error("RX response at ring index " + std::to_string(rx_processed_.value()) +
                   " is not in its request's slot (packet dropped)");
    return false;
  }
  if (p.gso) {
    ++stats_.rx_gso_checked;
    if (!rx_gso_flags_ok(p))
      protocol_error("GSO packet without both csum_blank and data_validated");
  }
  return true;
}

}  // namespace unetback::netfront
