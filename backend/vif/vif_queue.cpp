// A queue of a vif: its event wiring (the event channel, the TAP's readiness, its timers), the
// guest-TX and guest-RX passes over the rings, the switch's frames, housekeeping, the report it
// publishes for the control socket, and failure. Its host side (frames read from the TAP) is
// vif_queue_host.cpp.
#include "backend/vif/vif_queue.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string_view>
#include <thread>
#include <unistd.h>

#include "backend/vif/vif_queue_pass.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {
namespace {

using queue_pass::Clock;
using queue_pass::kRxPoolBuffers;
using queue_pass::kTapReadBatch;
using queue_pass::kTapReadBudget;
using queue_pass::pass_now;

constexpr auto kHousekeepingPeriod = std::chrono::milliseconds(100);
// Passes after the last work before an idle queue stops its timer: an idle guest costs no
// wake-up (as Linux's guest-RX thread sleeps without a timeout on an empty queue), and a TX kick
// lost in the 2 s after the last work is still found.
constexpr int kHousekeepingTail = 20;

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

VifQueue::VifQueue(event::EventLoop& loop, QueueResources res, std::string log_prefix,
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
  if (!switch_rx_.empty()) enqueue_handed(switch_rx_, counters_->rx_switch_packets);
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
