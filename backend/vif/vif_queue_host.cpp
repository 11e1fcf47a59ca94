// A queue's host side: frames the host sends the guest, read from the vif's TAP (a batch of
// reads that must not wait, reads kept posted in io_uring, or one read() a frame), each taken
// into the guest-RX queue with its vnet header, or, with several queues and the guest's hash
// settings, steered to the queue the hash picks (as Linux netback's xenvif_select_queue).
#include <algorithm>

#include "backend/vif/vif_queue.hpp"
#include "backend/vif/vif_queue_pass.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {

using queue_pass::Clock;
using queue_pass::kTapReadBatch;
using queue_pass::kTapReadBudget;
using queue_pass::pass_now;

std::size_t VifQueue::tap_room() const {
  const std::uint32_t queued = rx_->queued_bytes();
  const std::uint32_t cap = res_.rx.queue_bytes;
  std::size_t frames = queued < cap ? (cap - queued) / PacketPool::kMaxFrame : 0;
  if (queued == 0) frames = std::max<std::size_t>(frames, 1);
  // Posted reads may each bring a frame of the largest size: they count as queued.
  const std::size_t posted = tap_posted_ ? tap_posted_->in_flight() : 0;
  frames = frames > posted ? frames - posted : 0;
  return std::min(frames, rx_pool_.free_count());
}

std::span<std::byte> VifQueue::tap_read_span(int buf) const {
  return {rx_pool_.frame(buf) - net::kVnetHdrLen, net::kVnetHdrLen + PacketPool::kMaxFrame};
}

bool VifQueue::start_posted_reads() {
  if (stopped_ || tap_posted_) return static_cast<bool>(tap_posted_);
  tap_posted_.emplace(res_.tap_fd.get(), kTapReadBatch);
  if (!tap_posted_->is_open()) {
    tap_posted_.reset();
    return false;
  }
  try {
    tap_ring_sd_.watch(tap_posted_->ring_fd());
  } catch (const SetupError& e) {
    log::write(log::Level::warn, prefix_,
               std::string("TAP reads: no posted reads (") + e.what() + "): one read per frame");
    tap_posted_.reset();
    return false;
  }
  // From now on the frames come as completions: the TAP's readiness is not waited for.
  tap_sd_.cancel();
  tap_waiting_ = false;  // its cancelled handler returns at once; do_wait_tap posts from now on
  log::write(log::Level::info, prefix_,
             "TAP reads: kept posted in io_uring (the TAP refuses reads that must not wait)");
  post_tap_reads();
  do_wait_tap_ring();
  return true;
}

void VifQueue::post_tap_reads() {
  if (stopped_ || !tap_posted_) return;
  // A new chain once the last one has ended (one parked read at a time: see
  // FramePostedReader); frames that came meanwhile complete inside the submitting call.
  if (tap_posted_->in_flight() != 0) return;
  std::size_t want = std::min(tap_room(), tap_posted_->depth());
  if (want == 0) return;
  for (; want > 0; --want) {
    const int buf = rx_pool_.take();  // there are `want` free buffers (tap_room)
    (void)tap_posted_->post(tap_read_span(buf), static_cast<std::uint32_t>(buf));
  }
  tap_posted_frames_ = false;
  const auto now = pass_now();
  if (tap_posted_->submit(
          [this, now](std::uint32_t b, std::size_t len) { take_posted(b, len, now); })) {
    log::write(log::Level::warn, prefix_, "TAP reads: io_uring_enter failed: one read per frame");
    stop_posted_reads();
  }
  // Frames that were waiting completed inside the call: serve them after this handler.
  if (tap_posted_frames_) {
    post([this] { run_rx(); });
  }
}

void VifQueue::take_posted(std::uint32_t buf, std::size_t len, Clock::time_point now) {
  const int b = static_cast<int>(buf);
  if (len <= net::kVnetHdrLen || stopped_) {
    // Nothing read (a wakeup another read took, a cancel), or an empty frame.
    rx_pool_.give_back(b);
    return;
  }
  take_tap_frame(b, len - net::kVnetHdrLen, now);
  tap_posted_frames_ = true;
}

void VifQueue::do_wait_tap_ring() {
  if (stopped_ || tap_ring_waiting_ || !tap_posted_) return;
  tap_ring_waiting_ = true;
  tap_ring_sd_.async_wait(
      [this, t = op()](const std::error_code& ec) { guarded([&] { on_tap_ring_readable(ec); }); });
}

void VifQueue::on_tap_ring_readable(const std::error_code& ec) {
  tap_ring_waiting_ = false;
  if (stopped_ || ec || !tap_posted_) return;
  refresh_hash();
  const auto now = pass_now();
  tap_ring_sd_.drained();  // reap takes every completion: a later one is a new edge
  note_work();
  (void)tap_posted_->reap(
      [this, now](std::uint32_t b, std::size_t len) { take_posted(b, len, now); });
  run_rx();  // which posts the buffers again (post_tap_reads) as room allows
  do_wait_tap_ring();
}

void VifQueue::stop_posted_reads() {
  if (!tap_posted_) return;
  tap_ring_sd_.close();  // cancels its wait
  tap_posted_->cancel_all(
      [this](std::uint32_t b, std::size_t) { rx_pool_.give_back(static_cast<int>(b)); });
  tap_posted_syscalls_ += tap_posted_->syscalls();
  tap_posted_.reset();
  if (!stopped_) do_wait_tap();
}

void VifQueue::do_wait_tap() {
  if (tap_posted_) {
    post_tap_reads();
    return;
  }
  if (stopped_ || tap_waiting_) return;
  tap_waiting_ = true;
  tap_sd_.async_wait(
      [this, t = op()](const std::error_code& ec) { guarded([&] { on_tap_readable(ec); }); });
}

void VifQueue::on_tap_readable(const std::error_code& ec) {
  tap_waiting_ = false;
  if (stopped_ || ec || tap_posted_) return;
  take_tap();
}

void VifQueue::take_tap() {
  note_work();
  read_tap_frames();
  run_rx();
}

void VifQueue::refresh_hash() {
  if (!res_.hash) return;
  const std::uint64_t gen = res_.hash->generation();
  if (gen == hash_generation_) return;
  hash_generation_ = gen;
  hash_settings_ = res_.hash->load();
}

void VifQueue::drain_steered() {
  if (stopped_) return;
  (*res_.steer)[res_.id.value()]->take(steer_rx_, steer_done_);
  steer_done_.clear();  // steering sends no completions
  if (steer_rx_.empty()) return;
  note_work();
  enqueue_handed(steer_rx_, counters_->rx_steered_in);
}

void VifQueue::enqueue_handed(std::vector<RxPacket>& frames, std::atomic<std::uint64_t>& counter) {
  const auto now = pass_now();
  for (auto& p : frames) {
    QueueCounters::add(counter);
    (void)rx_->enqueue(std::move(p), now);
  }
  frames.clear();
  run_rx();
}

bool VifQueue::steer_frame(std::uint32_t to, RxPacket& p, std::span<const std::byte> frame) {
  const auto& link = (*res_.steer)[to];
  // As the switch does: drop before copying for a queue that would drop it.
  if (link->full(static_cast<std::uint32_t>(frame.size()))) {
    QueueCounters::add(counters_->rx_steer_dropped);
    return true;
  }
  const int i = steer_buffers_->take();
  if (i < 0) {
    QueueCounters::add(counters_->rx_steer_dropped);
    return true;
  }
  std::memcpy(steer_buffers_->data(i), frame.data(), frame.size());
  p.frags[0] = RxFrag{hv::GrantCopyPtr::local(steer_buffers_->data(i)),
                      static_cast<std::uint32_t>(frame.size())};
  p.release = steer_buffers_->share(steer_buffers_, i);
  steer_buffers_->unref(i);  // the receiver's reference is the only one now
  QueueCounters::add(counters_->rx_steered_out);
  (void)link->deliver(std::move(p));
  return true;
}

void VifQueue::read_tap_frames() {
  if (tap_posted_) return;  // the posted reads take the frames
  const auto now = pass_now();
  refresh_hash();
  std::size_t budget = kTapReadBudget;
  while (budget > 0) {
    // Linux netback stops the vif's netdev queue when its guest-RX queue is full, so the
    // host's qdisc holds the burst instead of dropping it; not reading the TAP is the same
    // back-pressure (the TAP's own queue holds the frames; the kernel drops only past it).
    const std::size_t want = std::min({tap_room(), budget, kTapReadBatch});
    if (want == 0) return;
    for (std::size_t i = 0; i < want; ++i) {
      tap_bufs_[i] = rx_pool_.take();  // there are `want` free buffers (tap_room)
      tap_spans_[i] = tap_read_span(tap_bufs_[i]);
    }
    const std::size_t tried =
        tap_reader_.read(std::span(tap_spans_).first(want), std::span(tap_sizes_).first(want));
    bool drained = tried < want;
    for (std::size_t i = 0; i < want; ++i) {
      if (i < tried && tap_sizes_[i] > net::kVnetHdrLen) {
        take_tap_frame(tap_bufs_[i], tap_sizes_[i] - net::kVnetHdrLen, now);
      } else {
        rx_pool_.give_back(tap_bufs_[i]);
        if (i < tried) drained = true;  // EAGAIN (drained), or an empty read
      }
    }
    budget -= std::min(budget, tried);
    if (drained) {
      tap_sd_.drained();  // the next wait waits for a new frame
      return;
    }
  }
  // Budget used up with frames left: come back after serving the ring.
  post([this] {
    if (!stopped_) {
      read_tap_frames();
      run_rx();
    }
  });
}

void VifQueue::take_tap_frame(int buf, std::size_t len, Clock::time_point now) {
  std::byte* frame = rx_pool_.frame(buf);
  std::byte* hdr = frame - net::kVnetHdrLen;
  const auto vh = net::load_vnet_hdr(std::span(hdr, net::kVnetHdrLen));
  auto offload = net::map_tap_rx(*vh, res_.offloads, std::span(frame, len), len);
  if (offload && offload->complete_checksum) {
    std::array<std::span<std::byte>, 1> parts{std::span(frame, len)};
    if (net::complete_checksum(parts, offload->csum_start, offload->csum_offset))
      offload = std::make_error_code(std::errc::invalid_argument);
  }
  if (!offload) {
    QueueCounters::add(counters_->rx_dropped_offload);
    rx_pool_.give_back(buf);
    return;
  }
  // netback's start_xmit: with request-multicast-control, a group the guest did not add is
  // dropped (one relaxed load when the filter is off).
  if (res_.mcast && len >= 6 && !res_.mcast->accepts(std::span<const std::byte, 6>(frame, 6))) {
    QueueCounters::add(counters_->rx_dropped_mcast_filter);
    rx_pool_.give_back(buf);
    return;
  }
  RxPacket p;
  p.frags[0] = RxFrag{hv::GrantCopyPtr::local(frame), static_cast<std::uint32_t>(len)};
  p.nr_frags = 1;
  p.len = static_cast<std::uint32_t>(len);
  p.offload = *offload;
  // Hashing only when the frontend asked for it (an algorithm and hash types set).
  if (hash_settings_ && hash_settings_->active()) {
    p.hash = hash_frame(*hash_settings_, std::span<const std::byte>(frame, len));
    if (p.hash) {
      QueueCounters::add(counters_->rx_hashed);
      const std::uint32_t to = hash_queue(*hash_settings_, p.hash->value);
      if (res_.steer && to != res_.id.value() && to < res_.steer->size()) {
        (void)steer_frame(to, p, std::span<const std::byte>(frame, len));
        rx_pool_.give_back(buf);
        return;
      }
    }
  }
  p.release = RxRelease(
      [](void* pool, std::uintptr_t i) noexcept {
        static_cast<PacketPool*>(pool)->give_back(static_cast<int>(i));
      },
      &rx_pool_, static_cast<std::uintptr_t>(buf));
  (void)rx_->enqueue(std::move(p), now);
}

}  // namespace unetback::vif
