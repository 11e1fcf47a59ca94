#include "frontend-shim/netfront.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <poll.h>

#include "common/util/log.hpp"

namespace unetback::netfront {

NetfrontStats& NetfrontStats::operator+=(const NetfrontStats& o) {
  tx_packets += o.tx_packets;
  tx_bytes += o.tx_bytes;
  tx_slots += o.tx_slots;
  tx_zerocopy += o.tx_zerocopy;
  tx_copy += o.tx_copy;
  tx_busy += o.tx_busy;
  tx_completed += o.tx_completed;
  tx_error_responses += o.tx_error_responses;
  tx_bad_response_id += o.tx_bad_response_id;
  tx_pages_held += o.tx_pages_held;
  tx_notify_sent += o.tx_notify_sent;
  tx_notify_suppressed += o.tx_notify_suppressed;
  rx_packets += o.rx_packets;
  rx_bytes += o.rx_bytes;
  rx_slots += o.rx_slots;
  for (std::size_t i = 0; i < rx_drops.size(); ++i) rx_drops[i] += o.rx_drops[i];
  rx_refills += o.rx_refills;
  rx_requests_posted += o.rx_requests_posted;
  rx_notify_sent += o.rx_notify_sent;
  rx_notify_suppressed += o.rx_notify_suppressed;
  broken += o.broken;
  rx_slot_checked += o.rx_slot_checked;
  rx_gso_checked += o.rx_gso_checked;
  rx_protocol_errors += o.rx_protocol_errors;
  return *this;
}

namespace {

constexpr std::string_view kStateToken = "netfront-backend-state";

std::optional<std::string> read_opt(hv::XenStore& xs, const std::string& path) {
  auto r = xs.read(path);
  if (!r) return std::nullopt;
  return std::move(*r);
}

}  // namespace

Netfront::Netfront(hv::Hypervisor& hv, NetfrontOptions opts)
    : hv_(hv), opts_(opts), xs_(hv.open_xenstore()) {
  if (auto problem = zerocopy::config_problem(opts_.tx_limiter))
    throw SetupError("netfront: bad tx_limiter: " + *problem);
  if (opts_.queues == 0 || opts_.rx_budget == 0)
    throw SetupError("netfront: queues and rx_budget must be >= 1");
  fe_dir_ = "/local/domain/" + std::to_string(hv_.self().value()) + "/device/vif/" +
            std::to_string(opts_.devid.value());
}

Netfront::~Netfront() {
  disconnect(std::chrono::milliseconds(0));
}

std::error_code Netfront::wait_backend_state(XenbusState want,
                                             std::chrono::steady_clock::time_point deadline,
                                             bool at_least) {
  // Met: the state is `want` (or, at_least, `want` or later, or the backend dir is gone).
  auto met = [&]() -> bool {
    auto state = read_opt(*xs_, be_dir_ + "/state");
    const auto v = state ? xenbus::parse_xenbus_state(*state) : std::nullopt;
    if (v && (*v == want || (at_least && *v >= want))) return true;
    return at_least && !state;
  };
  if (met()) return {};
  if (std::chrono::steady_clock::now() >= deadline)
    return std::make_error_code(std::errc::timed_out);
  // Event-driven: the node's watch fires once at once (closing the race with the read above)
  // and then at every change; the thread sleeps on the watch fd until then or the deadline.
  auto watch = hv::XsWatch::add(*xs_, be_dir_ + "/state", std::string(kStateToken));
  if (!watch) return watch.error();
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::make_error_code(std::errc::timed_out);
    pollfd pfd{xs_->watch_fd(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (ready < 0 && errno != EINTR) return last_errno();
    if (ready <= 0) continue;  // interrupted, or the deadline (checked above)
    bool fired = false;
    while (xs_->read_watch()) fired = true;
    if (auto ec = xs_->connection_error()) return ec;
    if (fired && met()) return {};
  }
}

std::error_code Netfront::connect(std::chrono::milliseconds timeout) {
  if (connected() || closing_) return std::make_error_code(std::errc::already_connected);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto be = xs_->read(fe_dir_ + "/backend");
  if (!be) return be.error();
  be_dir_ = *be;
  auto be_id = xs_->read(fe_dir_ + "/backend-id");
  if (!be_id) return be_id.error();
  const auto id = hv::parse_xs_uint<std::uint16_t>(*be_id);
  if (!id) return std::make_error_code(std::errc::invalid_argument);
  backend_id_ = DomId{*id};

  // Linux netfront connects when it sees the backend in InitWait (a zero timeout only looks).
  if (auto ec = wait_backend_state(XenbusState::init_wait, deadline, false)) return ec;

  backend_ =
      read_backend_features([&](const char* key) { return read_opt(*xs_, be_dir_ + "/" + key); });
  if (!backend_.rx_copy) {
    log::write(log::Level::error, "netfront", "backend does not support copying receive path");
    return std::make_error_code(std::errc::no_such_device);
  }
  std::uint32_t nq = 1;
  if (backend_.max_queues) {
    nq = std::clamp<std::uint32_t>(opts_.queues, 1,
                                   std::max<std::uint32_t>(*backend_.max_queues, 1));
  }
  split_ = opts_.split_event_channels && backend_.split_event_channels;

  QueueSetup setup;
  setup.backend = backend_id_;
  setup.split_event_channels = split_;
  setup.tx_sg = opts_.sg && backend_.sg;
  // Linux turns TSO off without SG.
  setup.tx_gso_tcpv4 = setup.tx_sg && opts_.gso_tcpv4 && backend_.gso_tcpv4;
  setup.tx_gso_tcpv6 = setup.tx_sg && opts_.gso_tcpv6 && backend_.gso_tcpv6;
  setup.rx_budget = opts_.rx_budget;
  setup.rx_refill = opts_.rx_refill;
  setup.limiter = opts_.tx_limiter;
  setup.tx_headroom = opts_.tx_headroom;
  setup.tx_buffer_pages = opts_.tx_buffer_pages;
  // A frontend without feature-rx-notify does not kick when it re-posts RX buffers.
  setup.rx_refill_kick = opts_.rx_notify && opts_.feature_keys;
  setup.rx_checks = opts_.rx_checks;

  std::vector<std::shared_ptr<NetfrontQueue>> queues;
  FrontendConnect fc;
  fc.rx_notify = opts_.rx_notify;
  fc.sg = opts_.sg;
  fc.gso_tcpv4 = opts_.gso_tcpv4;
  fc.gso_tcpv6 = opts_.gso_tcpv6;
  fc.ipv6_csum = opts_.csum_ipv6;
  // Mini-OS (no feature keys) knows nothing of multi-queue either.
  fc.write_num_queues =
      opts_.feature_keys && (backend_.max_queues.has_value() || opts_.always_write_num_queues);
  fc.feature_keys = opts_.feature_keys;
  fc.request_multicast_control =
      opts_.request_multicast_control && (backend_.mcast_control || backend_.dynamic_mcast_control);
  fc.split_event_channels = split_;
  if (backend_.xdp_headroom) {
    fc.xdp_headroom = opts_.xdp_headroom;
  } else if (opts_.xdp_headroom != 0) {
    log::write(log::Level::warn, "netfront",
               "the backend offers no feature-xdp-headroom: asking for no headroom");
  }
  xdp_headroom_ = fc.xdp_headroom.value_or(0);
  for (std::uint32_t i = 0; i < nq; ++i) {
    setup.id = QueueId{i};
    auto q = NetfrontQueue::create(hv_.grant_sharer(), hv_.open_event_channel(), setup);
    if (!q) return q.error();
    fc.queues.push_back((*q)->keys());
    queues.push_back(std::move(*q));
  }

  std::unique_ptr<CtrlClient> ctrl;
  if (opts_.ctrl_ring && backend_.ctrl_ring) {
    auto c = CtrlClient::create(hv_.grant_sharer(), hv_.open_event_channel(), backend_id_);
    if (!c) return c.error();
    ctrl = std::move(*c);
    fc.ctrl = std::pair(ctrl->ring_ref(), ctrl->port());
  }

  const auto keys = frontend_connect_keys(fc);
  const std::error_code ec = hv::transact(*xs_, [&](hv::XsTx tx) -> std::error_code {
    for (const auto& [key, value] : keys)
      if (auto e = xs_->write(fe_dir_ + "/" + key, value, tx)) return e;
    return {};
  });
  if (ec) return ec;
  queues_ = std::move(queues);
  ctrl_ = std::move(ctrl);
  return {};
}

std::error_code Netfront::begin_xdp_headroom_change(std::uint32_t headroom) {
  if (!connected()) return std::make_error_code(std::errc::not_connected);
  if (!backend_.xdp_headroom) return std::make_error_code(std::errc::not_supported);
  if (headroom > kMaxXdpHeadroom) return std::make_error_code(std::errc::invalid_argument);
  // xennet_xdp_set(): Reconfiguring first, then the key (not in one transaction).
  if (auto ec = write_state(XenbusState::reconfiguring)) return ec;
  if (auto ec = xs_->write(fe_dir_ + "/xdp-headroom", std::to_string(headroom))) return ec;
  xdp_headroom_ = headroom;
  return {};
}

std::error_code Netfront::end_xdp_headroom_change() {
  if (!connected()) return std::make_error_code(std::errc::not_connected);
  return write_state(XenbusState::connected);
}

std::error_code Netfront::write_state(XenbusState s) {
  return xs_->write(fe_dir_ + "/state", xenbus::to_xs_string(s));
}

void Netfront::disconnect(std::chrono::milliseconds wait_for_backend) {
  if (!connected() && !closing_) return;
  const auto deadline = std::chrono::steady_clock::now() + wait_for_backend;
  begin_disconnect();
  if (wait_for_backend.count() > 0) (void)wait_backend_state(XenbusState::closing, deadline, true);
  finish_disconnect();
}

void Netfront::begin_disconnect() {
  if (!connected()) return;
  closing_ = true;
  (void)write_state(XenbusState::closing);
}

bool Netfront::backend_closing() {
  auto state = read_opt(*xs_, be_dir_ + "/state");
  if (!state) return true;  // the backend directory is gone
  const auto v = xenbus::parse_xenbus_state(*state);
  return v && *v >= XenbusState::closing;
}

void Netfront::drop_rings() {
  closing_ = false;
  queues_.clear();
  ctrl_.reset();
}

void Netfront::finish_disconnect() {
  if (!connected() && !closing_) return;
  closing_ = false;
  // Unbinds the ports and revokes every grant; the sharer defers those the backend holds.
  queues_.clear();
  ctrl_.reset();
  (void)write_state(XenbusState::closed);
}

NetfrontQueue* Netfront::queue(QueueId q) const {
  return q.value() < queues_.size() ? queues_[q.value()].get() : nullptr;
}

namespace {
std::errc missing(const Netfront& nf) {
  return nf.connected() ? std::errc::invalid_argument : std::errc::not_connected;
}
}  // namespace

Result<TxSendInfo> Netfront::send(std::span<const std::byte> frame, const TxMeta& meta, QueueId q) {
  NetfrontQueue* nq = queue(q);
  if (!nq) return missing(*this);
  return nq->send(frame, meta);
}

Result<TxBuffer> Netfront::alloc_tx_buffer(std::size_t len, QueueId q) {
  NetfrontQueue* nq = queue(q);
  if (!nq) return missing(*this);
  return nq->alloc_tx_buffer(len);
}

Result<TxSendInfo> Netfront::send(TxBuffer&& buffer, const TxMeta& meta, QueueId q) {
  NetfrontQueue* nq = queue(q);
  if (!nq) return missing(*this);
  return nq->send(std::move(buffer), meta);
}

Result<TxSendInfo> Netfront::send_raw(std::span<const RawTxSlot> slots,
                                      std::span<const std::byte> data, const TxMeta& meta,
                                      std::optional<std::uint16_t> first_size, QueueId q) {
  NetfrontQueue* nq = queue(q);
  if (!nq) return missing(*this);
  return nq->send_raw(slots, data, meta, first_size);
}

std::size_t Netfront::poll(std::vector<RxPacket>& out, QueueId q) {
  NetfrontQueue* nq = queue(q);
  return nq ? nq->poll(out) : 0;
}

std::size_t Netfront::poll(RxSink& sink, QueueId q) {
  NetfrontQueue* nq = queue(q);
  return nq ? nq->poll(sink) : 0;
}

int Netfront::event_fd(QueueId q) const {
  NetfrontQueue* nq = queue(q);
  return nq ? nq->event_fd() : -1;
}

EventKinds Netfront::handle_event(QueueId q) {
  NetfrontQueue* nq = queue(q);
  return nq ? nq->handle_event() : EventKinds{};
}

void Netfront::process_tx_responses(QueueId q) {
  if (NetfrontQueue* nq = queue(q)) nq->process_tx_responses();
}

NetfrontStats Netfront::stats() const {
  NetfrontStats s;
  for (const auto& q : queues_) s += q->stats();
  return s;
}

NetfrontStats Netfront::stats(QueueId q) const {
  NetfrontQueue* nq = queue(q);
  return nq ? nq->stats() : NetfrontStats{};
}

}  // namespace unetback::netfront
