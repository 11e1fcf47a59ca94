// VifQueue: one queue of a connected vif, on one event-loop thread. It owns the queue's
// mapped ring pages, event-channel ports, grant-table handle and TAP queue fd, and wires the
// event sources to the two data paths:
//   event channel (tx/rx port)  -> TxPath::process / RxPath::process, then unmask
//   TAP readable                -> frames into RxPath's queue, then RxPath::process
//   timers                      -> RX expiry and stall (carrier), TX rate-limit retry
// A protocol violation found by TxPath stops the queue and calls on_fatal (the vif reports
// it to xenbus from the daemon's thread, never from here: XSA-90).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "backend/vif/packet_pool.hpp"
#include "backend/vif/packet_sink.hpp"
#include "backend/vif/queue_counters.hpp"
#include "backend/vif/queue_link.hpp"
#include "backend/vif/rx_path.hpp"
#include "backend/vif/switch_buffers.hpp"
#include "backend/vif/tx_path.hpp"
#include "backend/vif/vif_handle.hpp"
#include "common/event/event_loop.hpp"
#include "common/event/loop_handler.hpp"
#include "common/hv/event_channel.hpp"
#include "common/net/frame_batch_reader.hpp"
#include "common/net/frame_batch_writer.hpp"
#include "common/net/frame_posted_reader.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::vif {

/// Everything a queue needs, prepared (mapped, bound, attached) by Vif::connect.
struct QueueResources {
  QueueId id{};
  std::unique_ptr<hv::GrantTable> table;  // this thread's own handle (copy is not reentrant)
  hv::MappedGrants tx_page, rx_page;      // the ring pages (unmapped last)
  std::optional<ring::TxBackRing> tx_ring;
  std::optional<ring::RxBackRing> rx_ring;
  std::unique_ptr<hv::EventChannel> evtchn;
  hv::BoundPort tx_port, rx_port;    // rx_port unbound when the channel is shared
  UniqueFd tap_fd;                   // this queue's TAP fd (vnet_hdr, non-blocking)
  net::FrontendOffloads offloads{};  // what the frontend takes on guest RX
  RxConfig rx;
  TxConfig tx;
  std::uint64_t rate_bytes = ~std::uint64_t{0}, rate_usecs = 0;
  /// The vif's hash settings, published by its control ring (null without one).
  std::shared_ptr<const SharedHashSettings> hash;
  /// Every queue's steering link, by queue index (null unless a multi-queue vif has a control
  /// ring): a hashed TAP frame goes to the queue the frontend's mapping names.
  std::shared_ptr<const std::vector<std::shared_ptr<QueueLink>>> steer;
  /// The vif's guest-RX multicast filter (null: none).
  std::shared_ptr<const McastFilter> mcast;
};

class VifQueue {
 public:
  /// `on_carrier(ok)` runs on the queue's thread when the queue's RX stall state changes
  /// (ok = false: no room for the head packet for rx-stall-timeout).
  /// Throws SetupError (code(): the errno) when a descriptor, the packet pools' memory or the
  /// loop's epoll registration cannot be had; everything taken, `res` included, is then
  /// released. Vif::connect turns that into the vif's connect failure.
  VifQueue(event::EventLoop& loop, QueueResources res, std::string log_prefix,
           std::function<void(std::string)> on_fatal, std::function<void(bool)> on_carrier);
  ~VifQueue();  // requires stop() first
  VifQueue(const VifQueue&) = delete;
  VifQueue& operator=(const VifQueue&) = delete;

  /// Starts waiting for events and frames (on the queue's thread).
  void start();
  /// Stops everything and waits until no handler of this queue can run any more; then the
  /// object may be destroyed (which unbinds the ports and unmaps the rings). Any thread.
  void stop();

  /// The toolstack's new B:rate; returns once the queue's thread has taken it, so every TX
  /// pass after the return is under it. Any thread but the queue's.
  void set_rate(std::uint64_t bytes, std::uint64_t usecs);
  /// The frontend's new XDP headroom; returns once the queue's thread has taken it (between
  /// two RX passes), so no packet laid out after the return uses the old one. Any thread
  /// but the queue's.
  void set_xdp_headroom(std::uint32_t headroom);
  /// Counters, gauges and ring indices as the queue's thread last published them (at the end
  /// of its latest handler), once the handler in progress (if any) has ended, so a report
  /// shows everything a handler that began before the call did: a frame the host has received
  /// is counted. Waits for nothing else (not for the tasks queued on the thread), and for that
  /// handler a second at most; never stops the queue. Any thread.
  [[nodiscard]] QueueReport report() const;

  /// How the TAP's frames are read (vif_queue.cpp, UNETBACK_TAP_READS).
  enum class TapReads : std::uint8_t { batch, posted, read };

 private:
  /// A pass's frames to the TAP in one io_uring_enter (writev each where io_uring is not
  /// available).
  class TapSink final : public PacketSink {
   public:
    TapSink(int fd, bool io_uring) : writer_(fd, kFramesPerFlush, io_uring) {}
    std::error_code deliver(const net::VirtioNetHdr& hdr, std::span<const iovec> frame) override {
      return writer_.add(hdr, frame);
    }
    void flush(std::span<std::error_code> results) override { writer_.flush(results); }
    [[nodiscard]] const net::FrameBatchWriter& writer() const { return writer_; }

   private:
    static constexpr std::size_t kFramesPerFlush = 64;  // a TX pass (max_packets_per_pass)
    net::FrameBatchWriter writer_;
  };

  void do_wait_event();
  void on_event(const std::error_code& ec);
  /// Whether frames may be read from the TAP now (a free buffer, the queue under its cap).
  [[nodiscard]] bool tap_has_room() const { return tap_room() > 0; }
  /// How many frames may be read from the TAP now: free buffers, and room under the queue's
  /// cap for that many of the largest frames (so a frame once read is never dropped for the
  /// cap; an empty queue always takes one).
  [[nodiscard]] std::size_t tap_room() const;
  void do_wait_tap();
  void on_tap_readable(const std::error_code& ec);
  void read_tap_frames();
  /// Where a TAP read into pool buffer `buf` goes: its virtio_net_hdr, then the frame.
  [[nodiscard]] std::span<std::byte> tap_read_span(int buf) const;
  /// The frames waiting in the TAP into the queue, then an RX pass.
  void take_tap();
  /// UNETBACK_TAP_READS=posted: keeps reads posted in an io_uring (FramePostedReader), the
  /// way to batch where the TAP refuses reads that must not wait (Linux 6.1), and waits on
  /// its completions; false where it cannot (no io_uring, or no descriptor for the loop),
  /// and the plain reads go on.
  bool start_posted_reads();
  /// Posts a read for each buffer the queue has room for (one io_uring_enter), when at least
  /// half the reader's depth is free or none is posted.
  void post_tap_reads();
  void do_wait_tap_ring();
  void on_tap_ring_readable(const std::error_code& ec);
  /// A posted read's completion: the frame into the queue, or the buffer back.
  void take_posted(std::uint32_t buf, std::size_t len, std::chrono::steady_clock::time_point now);
  /// The posted reads are cancelled (their buffers back) and the TAP is read as before.
  void stop_posted_reads();
  /// A frame read into pool buffer `buf`: offloads mapped, queued for the guest.
  void take_tap_frame(int buf, std::size_t len, std::chrono::steady_clock::time_point now);
  /// Picks up the control ring's newest hash settings (one relaxed load when unchanged).
  void refresh_hash();
  /// Hands a hashed frame to queue `to` in a copy (our pool's buffer is ours alone); true if
  /// the frame is gone from here (handed over or dropped).
  bool steer_frame(std::uint32_t to, RxPacket& p, std::span<const std::byte> frame);
  /// Frames other queues steered to us.
  void drain_steered();
  /// Puts frames another queue or the switch handed over into the guest-RX queue, counting
  /// each in `counter`, and runs a guest-RX pass.
  void enqueue_handed(std::vector<RxPacket>& frames, std::atomic<std::uint64_t>& counter);
  void run_tx();
  void run_rx();
  /// Runs `pass` (an RX pass) and adds the packets it delivered to the guest to `delivered`.
  template <typename F>
  void count_rx_delivered(std::atomic<std::uint64_t>& delivered, F&& pass) {
    const auto before = counters_->rx_packets.load(std::memory_order_relaxed);
    std::forward<F>(pass)();
    QueueCounters::add(delivered, counters_->rx_packets.load(std::memory_order_relaxed) - before);
  }
  /// Internal switch: packets other vifs sent us, and our zerocopy packets they are done with.
  void drain_switch();
  void arm_housekeeping();
  /// Work came from outside (an event, the TAP, another queue): the housekeeping timer runs
  /// again, for kHousekeepingTail passes after the last work or as long as packets wait.
  void note_work();
  void arm_rx_poll();
  void on_housekeeping(const std::error_code& ec);
  void arm_tx_retry(std::chrono::steady_clock::time_point at);
  /// Stops every wait of this queue (their handlers then see stopped_ and return).
  void cancel_all();

  event::HandlerToken op() { return event::HandlerToken(outstanding_); }
  /// Runs a handler of this queue: what it throws fails the vif (loop_handler.hpp). Then the
  /// values report() gives out are published. The outermost handler's start and end move
  /// handler_seq_ (odd while one runs), so that report() can wait for the one in progress.
  template <typename F>
  void guarded(F&& f) noexcept {
    if (handler_depth_++ == 0) handler_seq_.fetch_add(1, std::memory_order_acq_rel);
    event::run_guarded(std::forward<F>(f),
                       [this](const char* what) noexcept { handler_threw(what); });
    if (--handler_depth_ == 0) {
      publish();
      handler_seq_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  /// The gauges and ring indices only this thread may read, stored where report() finds them.
  void publish() noexcept;
  /// post() of a queue handler, counted and guarded.
  template <typename F>
  void post(F&& f) {
    loop_.post([this, t = op(), f = std::forward<F>(f)]() mutable { guarded(f); });
  }
  void fail(const std::string& why);
  void handler_threw(const char* what) noexcept;

  event::EventLoop& loop_;
  QueueResources res_;
  std::string prefix_;
  std::function<void(std::string)> on_fatal_;
  std::function<void(bool)> on_carrier_;
  std::unique_ptr<QueueCounters> counters_;
  /// What publish() stores for report(): the gauges (names in vif_queue.cpp) and both rings'
  /// indices (RingIndices' six words each).
  static constexpr std::size_t kGauges = 12;
  std::array<std::atomic<std::uint64_t>, kGauges> gauges_{};
  std::array<std::atomic<std::uint32_t>, 6> tx_indices_{}, rx_indices_{};
  std::atomic<std::uint64_t> handler_seq_{0};  // odd while a handler of this queue runs
  int handler_depth_ = 0;                      // nested guarded() calls (queue thread only)
  TapSink sink_;
  const TapReads tap_reads_;
  net::FrameBatchReader tap_reader_;  // the TAP's frames, a batch per io_uring_enter
  /// Reads kept posted (UNETBACK_TAP_READS=posted); the TAP's readiness is then not waited
  /// for.
  std::optional<net::FramePostedReader> tap_posted_;
  std::uint64_t tap_posted_syscalls_ = 0;  // of readers given up
  std::optional<TxPath> tx_;
  std::optional<RxPath> rx_;
  PacketPool rx_pool_;
  event::LoopWatch evtchn_sd_;
  event::LoopWatch tap_sd_;
  event::LoopWatch tap_ring_sd_;  // tap_posted_'s ring
  bool tap_ring_waiting_ = false;
  bool tap_posted_frames_ = false;  // take_posted queued a frame since the flag was cleared
  event::LoopTimer housekeeping_;
  bool housekeeping_armed_ = false;
  int housekeeping_idle_ = 0;  // passes in a row that found nothing waiting
  event::LoopTimer tx_retry_;
  event::LoopTimer rx_poll_;  // RxConfig::poll_interval (no feature-rx-notify)
  bool rx_poll_armed_ = false;
  bool tap_waiting_ = false;
  bool tx_retry_armed_ = false;
  bool stopped_ = false;
  std::atomic<int> outstanding_{0};
  bool carrier_ = true;      // the RX path's last carrier state (queue thread only)
  bool tx_stalled_ = false;  // TX stopped at the zerocopy pending limit (fallback off)
  std::vector<RxPacket> switch_rx_;
  std::vector<QueueLink::TxDone> switch_done_;
  std::shared_ptr<const HashSettings> hash_settings_;  // the snapshot in use (may be null)
  std::uint64_t hash_generation_ = ~std::uint64_t{0};
  std::shared_ptr<SwitchBuffers> steer_buffers_;  // copies of frames steered away (owner: us)
  std::vector<RxPacket> steer_rx_;
  // read_tap_frames' batch: pool buffer, where the read goes, the frame's length.
  std::vector<int> tap_bufs_;
  std::vector<std::span<std::byte>> tap_spans_;
  std::vector<std::size_t> tap_sizes_;
  std::vector<QueueLink::TxDone> steer_done_;
};

}  // namespace unetback::vif
