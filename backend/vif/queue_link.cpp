#include "backend/vif/queue_link.hpp"

#include <utility>

namespace unetback::vif {

bool QueueLink::deliver(RxPacket&& p) {
  {
    const std::lock_guard lock(mu_);
    if (schedule_) {
      inbox_bytes_.store(inbox_bytes_.load(std::memory_order_relaxed) + p.len,
                         std::memory_order_relaxed);
      rx_.push_back(std::move(p));
      if (!std::exchange(scheduled_, true)) schedule_();
      return true;
    }
  }
  if (p.release) p.release();
  return false;
}

void QueueLink::tx_done(TxDone d) {
  const std::lock_guard lock(mu_);
  if (!schedule_) return;
  done_.push_back(d);
  if (!std::exchange(scheduled_, true)) schedule_();
}

void QueueLink::attach(std::function<void()> schedule) {
  const std::lock_guard lock(mu_);
  schedule_ = std::move(schedule);
  scheduled_ = false;
  if (!rx_.empty() || !done_.empty()) {
    scheduled_ = true;
    schedule_();
  }
}

void QueueLink::detach() {
  std::vector<RxPacket> left;
  {
    const std::lock_guard lock(mu_);
    schedule_ = nullptr;
    left.swap(rx_);
    done_.clear();
    inbox_bytes_.store(0, std::memory_order_relaxed);
  }
  for (auto& p : left)
    if (p.release) p.release();
}

void QueueLink::take(std::vector<RxPacket>& rx, std::vector<TxDone>& done) {
  const std::lock_guard lock(mu_);
  scheduled_ = false;
  rx.swap(rx_);
  done.swap(done_);
  inbox_bytes_.store(0, std::memory_order_relaxed);
}

bool QueueLink::full(std::uint32_t len) const {
  const std::uint64_t queued = std::uint64_t{backlog_.queued.load(std::memory_order_relaxed)} +
                               inbox_bytes_.load(std::memory_order_relaxed);
  // RxPath::enqueue's rule: an empty queue takes any packet.
  return queued != 0 && queued + len > backlog_.cap.load(std::memory_order_relaxed);
}

}  // namespace unetback::vif
