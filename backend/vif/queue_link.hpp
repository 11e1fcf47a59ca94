// QueueLink: one queue of a vif on a switch (or a steering target), as other threads reach
// it: a locked inbox of packets and zerocopy completions, drained on the queue's own thread,
// and the queue's published RX backlog, so that senders drop before they copy for a full
// queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/vif/rx_path.hpp"

namespace unetback::vif {

/// One queue of a vif on a switch, as other threads reach it.
class QueueLink {
 public:
  /// A zerocopy TX packet of this queue is no longer read by anyone (its receiver copied or
  /// dropped it): answer its slots. `token` is its PendingLimiter token index.
  struct TxDone {
    std::uint16_t token = 0;
    bool delivered = false;
  };

  /// Hands a packet to this queue's RX path. Any thread. False (and `p` released at once) if
  /// the queue is not running.
  bool deliver(RxPacket&& p);
  /// Reports a completion back to the sending queue. Any thread; ignored once it stopped.
  void tx_done(TxDone d);

  /// The queue's side: `schedule` posts its drain handler onto its thread (called under the
  /// link's lock, at most once until take() ran).
  void attach(std::function<void()> schedule);
  /// After it nothing is scheduled any more; packets still in the inbox are released.
  void detach();
  /// On the queue's thread: takes the inbox (and allows the next schedule).
  void take(std::vector<RxPacket>& rx, std::vector<TxDone>& done);

  /// Any thread, no lock: true if a packet of `len` bytes would find the queue's RX backlog
  /// (its RxPath queue plus the inbox) past its byte cap, so the sender drops it before it
  /// copies or holds it, as a full netdev queue drops (seed 000). A stale read only lets one
  /// packet more or less through; the queue's own cap still holds.
  [[nodiscard]] bool full(std::uint32_t len) const;
  /// A sender left a frame for this queue out: the guest's multicast filter refuses its group.
  /// Any thread, no lock; the queue's RxPath counts it (rx_dropped_mcast_filter).
  void count_mcast_filtered() { backlog_.mcast_filtered.fetch_add(1, std::memory_order_relaxed); }
  /// The queue's RxPath publishes its queued bytes and cap here (RxConfig::backlog).
  [[nodiscard]] std::shared_ptr<RxBacklog> backlog(const std::shared_ptr<QueueLink>& self) {
    return {self, &backlog_};
  }

 private:
  RxBacklog backlog_;
  std::atomic<std::uint32_t> inbox_bytes_{0};  // written under mu_, read by full()
  std::mutex mu_;
  std::function<void()> schedule_;
  bool scheduled_ = false;
  std::vector<RxPacket> rx_;
  std::vector<TxDone> done_;
};

}  // namespace unetback::vif
