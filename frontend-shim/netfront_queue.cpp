// NetfrontQueue's setup (rings, granted pages, event channels) and its event handling; the
// TX half is in netfront_tx.cpp, the RX half in netfront_rx.cpp.
#include "frontend-shim/netfront_queue.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/util/log.hpp"
#include "frontend-shim/rx_refill.hpp"

namespace unetback::netfront {

// --- TxBuffer ---

TxBuffer::~TxBuffer() {
  release();
}

TxBuffer::TxBuffer(TxBuffer&& o) noexcept
    : queue_(std::move(o.queue_)),
      pages_(o.pages_),
      addrs_(o.addrs_),
      npages_(std::exchange(o.npages_, 0)),
      plan_(o.plan_),
      len_(std::exchange(o.len_, 0)) {}

TxBuffer& TxBuffer::operator=(TxBuffer&& o) noexcept {
  if (this != &o) {
    release();
    queue_ = std::move(o.queue_);
    pages_ = o.pages_;
    addrs_ = o.addrs_;
    npages_ = std::exchange(o.npages_, 0);
    plan_ = o.plan_;
    len_ = std::exchange(o.len_, 0);
  }
  return *this;
}

void TxBuffer::release() {
  if (auto q = queue_.lock(); q && npages_ > 0)
    q->return_pool_pages(std::span(pages_.data(), npages_));
  queue_.reset();
  npages_ = 0;
  plan_ = {};
  len_ = 0;
}

std::error_code TxBuffer::shrink(std::size_t len) {
  auto q = queue_.lock();
  if (!q || len > len_ || npages_ == 0) return std::make_error_code(std::errc::invalid_argument);
  // The same first offset keeps the shorter frame's slots a prefix of the longer one's.
  auto plan = plan_tx_slots(len, plan_.slots[0].offset, q->setup_.tx_sg);
  if (!plan || plan->count > plan_.count || plan->slots[0].offset != plan_.slots[0].offset)
    return std::make_error_code(std::errc::invalid_argument);
  if (plan->count < npages_)
    q->return_pool_pages(std::span(pages_.data() + plan->count, npages_ - plan->count));
  npages_ = plan->count;
  plan_ = *plan;
  len_ = len;
  return {};
}

std::span<std::byte> TxBuffer::segment(std::size_t i) const {
  if (i >= npages_) return {};
  return {addrs_[i] + plan_.slots[i].offset, plan_.slots[i].size};
}

bool TxBuffer::write(std::size_t offset, std::span<const std::byte> data) {
  if (offset > len_ || data.size() > len_ - offset) return false;
  for (std::size_t i = 0; i < plan_.count && !data.empty(); ++i) {
    const std::span<std::byte> seg = segment(i);
    if (offset >= seg.size()) {
      offset -= seg.size();
      continue;
    }
    const std::size_t n = std::min(seg.size() - offset, data.size());
    std::memcpy(seg.data() + offset, data.data(), n);
    data = data.subspan(n);
    offset = 0;
  }
  return true;
}

// --- NetfrontQueue: setup ---

NetfrontQueue::NetfrontQueue(hv::GrantSharer& sharer, std::unique_ptr<hv::EventChannel> channel,
                             const QueueSetup& setup)
    : sharer_(sharer), setup_(setup), channel_(std::move(channel)), limiter_(setup.limiter) {}

NetfrontQueue::~NetfrontQueue() = default;

Result<std::shared_ptr<NetfrontQueue>> NetfrontQueue::create(
    hv::GrantSharer& sharer, std::unique_ptr<hv::EventChannel> channel, const QueueSetup& setup) {
  if (setup.tx_headroom > wire::kPageSize / 2 || setup.tx_buffer_pages < kMaxTxDataSlots)
    return std::errc::invalid_argument;
  std::shared_ptr<NetfrontQueue> q(new NetfrontQueue(sharer, std::move(channel), setup));
  const DomId be = setup.backend;

  auto rings = sharer.share(be, 2, hv::Access::read_write);
  if (!rings) return rings.error();
  q->ring_pages_ = std::move(*rings);
  auto rx_pages = sharer.share(be, kRxRingSize, hv::Access::read_write);
  if (!rx_pages) return rx_pages.error();
  q->rx_pages_ = std::move(*rx_pages);
  auto copy_pages = sharer.share(be, kTxRingSize, hv::Access::read_only);
  if (!copy_pages) return copy_pages.error();
  q->tx_copy_pages_ = std::move(*copy_pages);
  auto pool = sharer.share(be, setup.tx_buffer_pages, hv::Access::read_only);
  if (!pool) return pool.error();
  q->tx_pool_ = std::move(*pool);

  q->tx_ = ring::TxFrontRing::init(q->ring_pages_.page(0));
  q->rx_ = ring::RxFrontRing::init(q->ring_pages_.page(1));

  auto tx_port = q->channel_->bind_unbound(be);
  if (!tx_port) return tx_port.error();
  q->tx_port_ = hv::BoundPort(*q->channel_, *tx_port);
  if (setup.split_event_channels) {
    auto rx_port = q->channel_->bind_unbound(be);
    if (!rx_port) return rx_port.error();
    q->rx_port_ = hv::BoundPort(*q->channel_, *rx_port);
  }

  for (std::uint32_t i = kTxRingSize; i-- > 0;) {
    q->free_ids_.push_back(static_cast<std::uint16_t>(i));
    q->free_packets_.push_back(static_cast<std::uint16_t>(i));
  }
  for (std::uint32_t i = setup.tx_buffer_pages; i-- > 0;) q->free_pool_.push_back(i);

  // Linux netfront posts a full ring of buffers before it connects.
  q->post_rx_buffers(kRxRingSize);
  return q;
}

QueueKeys NetfrontQueue::keys() const {
  const Port rx = setup_.split_event_channels ? rx_port_.port() : tx_port_.port();
  return QueueKeys{ring_pages_.ref(0), ring_pages_.ref(1), tx_port_.port(), rx};
}

void NetfrontQueue::mark_broken(const char* why) {
  if (!broken_) {
    broken_ = true;
    stats_.broken = 1;
    log::write(log::Level::error, "netfront-q" + std::to_string(setup_.id.value()),
               std::string("backend broke the protocol, queue stopped: ") + why);
  }
}

bool NetfrontQueue::grant_held(GrantRef ref) const {
  // `unknown` (libxengntshr cannot tell) is treated as released: the platform defers the
  // real revoke itself.
  return sharer_.in_use(ref) == hv::GrantUse::in_use;
}

EventKinds NetfrontQueue::handle_event() {
  EventKinds kinds;
  std::array<Port, 2> fired{};
  std::size_t nfired = 0;
  // At most our two ports can be pending; each is reported once and stays masked.
  for (int i = 0; i < 2; ++i) {
    auto p = channel_->pending();
    if (!p || !p->has_value()) break;
    const Port port = **p;
    if (port == tx_port_.port()) kinds.tx = true;
    if (!setup_.split_event_channels || port == rx_port_.port()) kinds.rx = true;
    fired[nfired++] = port;
  }
  process_tx_responses();
  // Unmask only after the work is done (lateeoi discipline, XSA-332).
  for (std::size_t i = 0; i < nfired; ++i) (void)channel_->unmask(fired[i]);
  return kinds;
}

}  // namespace unetback::netfront
