#include "backend/vif/vif_queue.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string_view>
#include <thread>
#include <unistd.h>

#include "common/util/coarse_clock.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {
namespace {

using Clock = std::chrono::steady_clock;

/// Host->TAP frames buffered per queue before the guest takes them (virtual: untouched
/// buffer pages cost nothing).
constexpr std::size_t kRxPoolBuffers = 256;
/// Frames read from the TAP per wakeup before the ring is served.
constexpr int kTapReadBudget = 64;
/// Reads one io_uring_enter submits: one call takes what a wakeup finds (a burst beyond it
/// takes another), and an idle TAP costs that many reads that find nothing, inside one call.
constexpr std::size_t kTapReadBatch = 16;
constexpr auto kHousekeepingPeriod = std::chrono::milliseconds(100);
// Passes after the last work before an idle queue stops its timer: an idle guest costs no
// wake-up (as Linux's guest-RX thread sleeps without a timeout on an empty queue), and a TX kick
// lost in the 2 s after the last work is still found.
constexpr int kHousekeepingTail = 20;

/// The clock of a pass: coarse (no syscall, see coarse_clock.hpp) unless UNETBACK_PRECISE_CLOCK
/// is set (steady_clock, as before: the way to compare the two in the lab, --b-env). In the
/// lab's full 3-round A/B (PV dom0, 2026-12-02) the coarse clock cut clock_gettime from 0.47 /
/// 0.39 to 0.05 / 0.12 per packet (guest RX / TX), every other call the same per packet; the
/// throughput difference stayed inside the rounds' spread (CHANGELOG.md, issue 16).
Clock::time_point pass_now() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing sets the environment while queues run.
  static const bool coarse = std::getenv("UNETBACK_PRECISE_CLOCK") == nullptr;
  return coarse ? coarse_now() : Clock::now();
}

/// How guest-RX frames are read from the TAP (UNETBACK_TAP_READS, read as each queue
/// starts): `batch` (the default) reads that must not wait, a batch per io_uring_enter, and
/// one read() per frame where the kernel refuses those (Linux 6.1's TAP); `posted` keeps
/// reads posted in io_uring (FramePostedReader), the way to batch on 6.1, not the default
/// yet: in the lab's A/B (one boot) it carried guest RX 27% faster but domU -> domU through
/// the bridge 2.2-2.9 times slower (docs/performance.md); `read` one read() per frame.
VifQueue::TapReads tap_reads_from_env() {
  using enum VifQueue::TapReads;
  if (!net::io_uring_wanted()) return read;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing sets the environment while queues start.
  const char* v = std::getenv("UNETBACK_TAP_READS");
  const std::string_view m = v == nullptr ? "batch" : v;
  if (m == "posted") return posted;
  if (m == "read") return read;
  return batch;
}

}  // namespace

VifQueue::VifQueue(EventLoop& loop, QueueResources res, std::string log_prefix,
                   std::function<void(std::string)> on_fatal, std::function<void(bool)> on_carrier)
    : loop_(loop),
      res_(std::move(res)),
      prefix_(std::move(log_prefix)),
      on_fatal_(std::move(on_fatal)),
      on_carrier_(std::move(on_carrier)),
      counters_(std::make_unique<QueueCounters>()),
      sink_(res_.tap_fd.get(), net::io_uring_wanted()),
      tap_reads_(tap_reads_from_env()),
      tap_reader_(res_.tap_fd.get(), kTapReadBatch, tap_reads_ != TapReads::read),
      rx_pool_(kRxPoolBuffers),
      evtchn_sd_(loop),
      tap_sd_(loop),
      tap_ring_sd_(loop),
      housekeeping_(loop),
      tx_retry_(loop),
      rx_poll_(loop) {
  // Registered once (SetupError with epoll_ctl's errno: ENOMEM, ENOSPC); the watches go
  // before the fds they watch (members declared after res_).
  evtchn_sd_.watch(res_.evtchn->fd());
  tap_sd_.watch(res_.tap_fd.get());
  tx_.emplace(*res_.tx_ring, *res_.table, sink_, res_.tx, *counters_);
  tx_->set_rate(res_.rate_bytes, res_.rate_usecs, Clock::now());
  rx_.emplace(*res_.rx_ring, *res_.table, res_.rx, *counters_);
  tap_bufs_.resize(kTapReadBatch);
  tap_spans_.resize(kTapReadBatch);
  tap_sizes_.resize(kTapReadBatch);
  if (res_.steer) {
    steer_buffers_ = std::make_shared<SwitchBuffers>();
    steer_rx_.reserve(kTapReadBudget);
    steer_done_.reserve(kTapReadBudget);
  }
  publish();  // report() has the rings' indices before the first handler runs
}

VifQueue::~VifQueue() {
  // stop() ran: no handler refers to us. Members go in reverse order: paths (which release
  // queued packets), then ports (unbind), then the ring pages (unmap), then the table.
  rx_.reset();
  tx_.reset();
}

void VifQueue::start() {
  log::write(log::Level::debug, prefix_,
             sink_.writer().mode() == net::FrameBatchWriter::Mode::io_uring
                 ? "TAP writes: one io_uring_enter per TX pass"
                 : "TAP writes: one writev per frame (io_uring unavailable)");
  log::write(log::Level::debug, prefix_,
             tap_reader_.mode() == net::FrameBatchReader::Mode::io_uring
                 ? "TAP reads: one io_uring_enter per batch of frames"
                 : "TAP reads: one read per frame (io_uring unavailable)");
  if (res_.tx.sw) res_.tx.sw->self->attach([this] { post([this] { drain_switch(); }); });
  if (res_.steer)
    (*res_.steer)[res_.id.value()]->attach([this] { post([this] { drain_steered(); }); });
  post([this] {
    do_wait_event();
    do_wait_tap();
    note_work();
    // Work may have been queued before we bound (netfront transmits at once): look now.
    run_tx();
    run_rx();
    // Frames may wait in the TAP already (an adopted vif's persistent TAP kept them while no
    // daemon ran): an edge-triggered wait would see no new edge for them. Take them now.
    if (tap_reads_ == TapReads::posted) {
      (void)start_posted_reads();
    } else {
      take_tap();
    }
  });
}

void VifQueue::stop() {
  if (res_.tx.sw) {
    // No other vif posts to us after this; receivers drop what they hold of ours (our
    // frontend may revoke those grants once we are gone).
    res_.tx.sw->self->detach();
    res_.tx.sw->alive->store(false, std::memory_order_release);
  }
  // Frames other queues steer to us from now on are released by their link at once.
  if (res_.steer) (*res_.steer)[res_.id.value()]->detach();
  post([this] { cancel_all(); });
  // cancel_all() makes every wait complete (operation_aborted) and every start path a no-op;
  // once no handler of ours exists any more, nothing can touch this object.
  while (outstanding_.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void VifQueue::set_rate(std::uint64_t bytes, std::uint64_t usecs) {
  // Waited for, as the headroom below: when the toolstack's write has been handled, every
  // TX pass after it is under the new rate (and the log line saying so is true).
  std::promise<void> done;
  post([this, bytes, usecs, &done] {
    if (!stopped_) {
      tx_->set_rate(bytes, usecs, Clock::now());
      run_tx();
    }
    done.set_value();
  });
  done.get_future().wait();
}

void VifQueue::set_xdp_headroom(std::uint32_t headroom) {
  std::promise<void> done;
  post([this, headroom, &done] {
    if (!stopped_) rx_->set_xdp_headroom(headroom);
    done.set_value();
  });
  done.get_future().wait();
}

namespace {

/// The gauges report() adds after the counters, in publish()'s order.
constexpr std::string_view kGaugeNames[] = {
    "rx_queued_bytes",
    // The frontend's XDP headroom slot 0 starts at now (F:xdp-headroom, 0 without XDP).
    "rx_xdp_headroom",
    "tx_zerocopy_in_flight",
    // tx-map auto: what mapping and copying cost per KiB here, as measured (0: not yet).
    "tx_map_ns_per_kib",
    "tx_copy_ns_per_kib",
    "tx_tap_io_uring",
    "tx_tap_syscalls",
    "rx_tap_io_uring",
    "rx_tap_posted_reads",
    "rx_tap_syscalls",
    "rx_tap_parked_reads",
    // 1: the kernel refused reads that must not wait (Linux 6.1's TAP), read() per frame.
    "rx_tap_nowait_refused",
};

void store_indices(std::array<std::atomic<std::uint32_t>, 6>& to, const ring::RingIndices& i) {
  const std::uint32_t words[] = {i.req_prod,
                                 i.req_event,
                                 i.rsp_prod,
                                 i.rsp_event,
                                 i.req_prod_pvt_or_req_cons,
                                 i.rsp_cons_or_rsp_prod_pvt};
  for (std::size_t k = 0; k < to.size(); ++k) to[k].store(words[k], std::memory_order_relaxed);
}

ring::RingIndices load_indices(const std::array<std::atomic<std::uint32_t>, 6>& from) {
  const auto w = [&](std::size_t k) { return from[k].load(std::memory_order_relaxed); };
  return {w(0), w(1), w(2), w(3), w(4), w(5)};
}

}  // namespace

void VifQueue::publish() noexcept {
  if (!tx_ || !rx_) return;
  const std::uint64_t values[] = {
      rx_->queued_bytes(),
      rx_->xdp_headroom(),
      tx_->limiter().in_flight(),
      tx_->map_chooser().map_ns_per_kib(),
      tx_->map_chooser().copy_ns_per_kib(),
      sink_.writer().mode() == net::FrameBatchWriter::Mode::io_uring ? 1U : 0U,
      sink_.writer().syscalls(),
      tap_reader_.mode() == net::FrameBatchReader::Mode::io_uring || tap_posted_ ? 1U : 0U,
      tap_posted_ ? 1U : 0U,
      tap_reader_.syscalls() + tap_posted_syscalls_ + (tap_posted_ ? tap_posted_->syscalls() : 0),
      tap_reader_.parked_reads(),
      tap_reader_.refused() ? 1U : 0U,
  };
  static_assert(std::size(values) == kGauges && std::size(kGaugeNames) == kGauges);
  for (std::size_t k = 0; k < kGauges; ++k) gauges_[k].store(values[k], std::memory_order_relaxed);
  store_indices(tx_indices_, tx_->ring().indices());
  store_indices(rx_indices_, rx_->ring().indices());
}

QueueReport VifQueue::report() const {
  // A handler of this queue in progress (odd): its counters may be half added and its gauges
  // not yet published. Wait for its end (the sequence moves on), a pass's time at most
  // normally; a thread held up for longer is not waited for.
  constexpr auto kReportWait = std::chrono::seconds(1);
  const std::uint64_t seq = handler_seq_.load(std::memory_order_acquire);
  if ((seq & 1U) != 0) {
    const auto deadline = std::chrono::steady_clock::now() + kReportWait;
    while (handler_seq_.load(std::memory_order_acquire) == seq &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  }
  QueueReport r;
  r.queue = res_.id;
  r.counters = counters_->snapshot();
  for (std::size_t k = 0; k < kGauges; ++k)
    r.counters.emplace_back(kGaugeNames[k], gauges_[k].load(std::memory_order_relaxed));
  r.tx_ring = load_indices(tx_indices_);
  r.rx_ring = load_indices(rx_indices_);
  return r;
}

void VifQueue::do_wait_event() {
  evtchn_sd_.async_wait(
      [this, t = op()](const std::error_code& ec) { guarded([&] { on_event(ec); }); });
}

void VifQueue::on_event(const std::error_code& ec) {
  if (stopped_ || ec) return;
  QueueCounters::add(counters_->events);
  note_work();
  bool tx = false, rx = false;
  // Every port that fired, in one call where the device allows it (Xen: one read of
  // /dev/xen/evtchn); a short batch means none is left.
  std::array<Port, 8> fired{};
  for (;;) {
    auto n = res_.evtchn->pending_batch(fired);
    if (!n) break;  // the channel's fd stays ready: the next wait looks again
    if (*n < fired.size()) evtchn_sd_.drained();  // none left
    if (*n == 0) break;
    for (std::size_t i = 0; i < *n; ++i) {
      if (fired[i] == res_.tx_port.port()) tx = true;
      if (!res_.rx_port.bound() || fired[i] == res_.rx_port.port()) {
        rx = true;
        if (!res_.rx_port.bound()) tx = true;  // one shared channel
      }
    }
    if (*n < fired.size()) break;
  }
  const auto tx_before = counters_->tx_packets.load(std::memory_order_relaxed);
  const auto rx_before = counters_->rx_packets.load(std::memory_order_relaxed);
  if (tx) run_tx();
  if (rx) run_rx();
  if (stopped_) return;
  if (counters_->tx_packets.load(std::memory_order_relaxed) == tx_before &&
      counters_->rx_packets.load(std::memory_order_relaxed) == rx_before) {
    QueueCounters::add(counters_->spurious_events);
  }
  // Unmask only after the work is done (the lateeoi discipline of XSA-332): an event storm
  // costs the guest its own wakeups, not dom0's CPU. Both ports in one call (Xen: one write).
  const std::array<Port, 2> ports{res_.tx_port.port(), res_.rx_port.port()};
  (void)res_.evtchn->unmask_batch(std::span(ports).first(res_.rx_port.bound() ? 2 : 1));
  do_wait_event();
}

void VifQueue::run_tx() {
  if (stopped_) return;
  // One clock read for the rounds (back to back), and the coarse clock unless a `rate` must
  // set a retry deadline: in a PV dom0 without a vDSO clock (Xen under QEMU: no stable TSC)
  // each precise read is a syscall (coarse_clock.hpp).
  const auto now = tx_->rate_limited() ? Clock::now() : pass_now();
  for (int round = 0; round < 4; ++round) {
    const auto pass = tx_->process(now);
    if (pass.notify) (void)res_.tx_port.notify();
    if (pass.fatal) {
      fail(std::string("guest TX: ") + std::string(tx_error_name(pass.fatal_reason)));
      return;
    }
    if (pass.retry_at) {
      arm_tx_retry(*pass.retry_at);
      return;
    }
    tx_stalled_ = pass.stalled;
    if (pass.stalled) return;  // a receiver's completion (drain_switch) resumes it
    if (pass.more) continue;
    // Out of requests: arm req_event and look once more (RING_FINAL_CHECK_FOR_REQUESTS).
    if (!tx_->final_check()) return;
  }
  // Budget spent with work left: yield to the other queues on this thread, then go on.
  post([this] { run_tx(); });
}

void VifQueue::drain_switch() {
  if (stopped_) return;
  note_work();
  res_.tx.sw->self->take(switch_rx_, switch_done_);
  if (!switch_done_.empty()) {
    if (tx_->complete_switched(switch_done_)) (void)res_.tx_port.notify();
    switch_done_.clear();
    if (tx_stalled_) run_tx();
  }
  if (!switch_rx_.empty()) {
    const auto now = pass_now();
    for (auto& p : switch_rx_) {
      QueueCounters::add(counters_->rx_switch_packets);
      (void)rx_->enqueue(std::move(p), now);
    }
    switch_rx_.clear();
    run_rx();
  }
}

void VifQueue::run_rx() {
  if (stopped_) return;
  const auto now = pass_now();  // one clock read per pass, and no syscall (see run_tx)
  const auto pass = rx_->process(now);
  if (pass.notify) {
    if (res_.rx_port.bound()) {
      (void)res_.rx_port.notify();
    } else {
      (void)res_.tx_port.notify();
    }
  }
  const bool carrier = rx_->update_carrier(now);
  if (carrier != std::exchange(carrier_, carrier)) {
    log::write(log::Level::warn, prefix_,
               carrier ? "guest RX ring has room again: carrier on"
                       : "guest RX stalled (no room for the head packet): carrier off");
    if (on_carrier_) on_carrier_(carrier);
  }
  if (!rx_->empty() && !pass.waiting_for_slots) {
    post([this] { run_rx(); });
  }
  // A frontend without feature-rx-notify posts buffers without a kick: look at the ring again
  // on a timer while the head packet waits for them.
  if (pass.waiting_for_slots && res_.rx.poll_interval) arm_rx_poll();
  // Room again (buffers back, queue under its cap): take frames from the TAP again.
  // (With posted reads, do_wait_tap posts the buffers again.)
  if (!tap_waiting_ && tap_has_room()) do_wait_tap();
}

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
  const auto now = pass_now();
  for (auto& p : steer_rx_) {
    QueueCounters::add(counters_->rx_steered_in);
    (void)rx_->enqueue(std::move(p), now);
  }
  steer_rx_.clear();
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

void VifQueue::arm_housekeeping() {
  housekeeping_armed_ = true;
  housekeeping_.expires_after(kHousekeepingPeriod);
  housekeeping_.async_wait([this, t = op()](const std::error_code& ec) {
    housekeeping_armed_ = false;
    guarded([&] { on_housekeeping(ec); });
  });
}

void VifQueue::note_work() {
  housekeeping_idle_ = 0;
  if (!housekeeping_armed_ && !stopped_) arm_housekeeping();
}

void VifQueue::arm_rx_poll() {
  if (rx_poll_armed_ || stopped_) return;
  rx_poll_armed_ = true;
  rx_poll_.expires_after(*res_.rx.poll_interval);
  rx_poll_.async_wait([this, t = op()](const std::error_code& ec) {
    rx_poll_armed_ = false;
    if (stopped_ || ec) return;
    QueueCounters::add(counters_->rx_polls);
    count_rx_delivered(counters_->rx_poll_packets, [this] { guarded([this] { run_rx(); }); });
  });
}

void VifQueue::on_housekeeping(const std::error_code& ec) {
  if (stopped_ || ec) return;
  QueueCounters::add(counters_->housekeeping_passes);
  // Expiry and stall detection run even when no event arrives (a guest that stopped
  // posting buffers sends none). Packets of a sender that went away leave the queue now.
  if (res_.tx.sw) (void)rx_->purge_dead_sources();
  count_rx_delivered(counters_->rx_housekeeping_packets, [this] { run_rx(); });
  // A lost or never-sent TX kick must not park published requests for ever (the frontend
  // sends no second one: req_event was not passed again). Looking costs one index read;
  // no tx retry pending means the rate limiter is not holding the ring back.
  if (!stopped_ && !tx_retry_armed_ && tx_->ring().unconsumed_requests() != 0) run_tx();
  if (stopped_) return;
  // Again while anything waits (guest-RX packets, TX requests, a stalled TX), and for a tail
  // after the last work; an idle queue then sleeps until an event, a frame or a peer wakes it.
  const bool waiting = !rx_->empty() || tx_->ring().unconsumed_requests() != 0 || tx_stalled_;
  if (waiting) housekeeping_idle_ = 0;
  if (waiting || ++housekeeping_idle_ < kHousekeepingTail) arm_housekeeping();
}

void VifQueue::arm_tx_retry(Clock::time_point at) {
  // An armed retry stays unless this one is sooner: a new `rate` may have shortened the wait,
  // and the old expiry (up to an interval of 71 minutes away) would hold the ring back.
  if (tx_retry_armed_ && tx_retry_.expiry() <= at) return;
  tx_retry_armed_ = true;
  tx_retry_.expires_at(at);  // a wait already armed completes with operation_aborted
  tx_retry_.async_wait([this, t = op()](const std::error_code& ec) {
    if (ec) return;  // replaced by a sooner retry, or the queue stops
    tx_retry_armed_ = false;
    if (stopped_) return;
    guarded([this] { run_tx(); });
  });
}

void VifQueue::cancel_all() {
  stopped_ = true;
  evtchn_sd_.cancel();
  tap_sd_.cancel();
  // Posted reads hold pool buffers: back before the pool or the TAP fd may go (a frame one
  // of them read meanwhile is dropped, as a frame the TAP held at a stop is).
  stop_posted_reads();
  housekeeping_.cancel();
  tx_retry_.cancel();
  rx_poll_.cancel();
}

void VifQueue::fail(const std::string& why) {
  // Stop serving this frontend at once; the teardown itself happens from the daemon's
  // thread through xenbus.
  cancel_all();
  // The owner logs it (rate-limited per vif: a guest can reconnect and fail again at will).
  if (on_fatal_) {
    on_fatal_(why);
  } else {
    log::write(log::Level::warn, prefix_, "disabling the vif: " + why);
  }
}

void VifQueue::handler_threw(const char* what) noexcept {
  // Not a guest's protocol violation but the same outcome: this vif stops and is closed from
  // the daemon's thread; the loop and every other vif on it go on.
  try {
    fail(std::string("internal error while serving the queue: ") + what);
    return;
  } catch (...) {
  }
  try {
    cancel_all();  // no memory even for the message: at least nothing of ours runs again
  } catch (...) {
  }
}

}  // namespace unetback::vif
