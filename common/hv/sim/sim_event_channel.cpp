#include "common/hv/sim/sim_event_channel.hpp"

#include <cerrno>
#include <sys/epoll.h>
#include <unistd.h>
#include <vector>

#include "common/hv/sim/domain_control.hpp"

namespace unetback::hv::sim {

namespace {

void signal_eventfd(int fd) {
  const std::uint64_t one = 1;
  // EAGAIN only when the counter is saturated: the event is pending either way.
  (void)!::write(fd, &one, sizeof(one));
}

std::error_code epoll_set(int ep, int op, int fd, std::uint32_t events, std::uint32_t port) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u32 = port;
  return ::epoll_ctl(ep, op, fd, &ev) == 0 ? std::error_code{} : last_errno();
}

}  // namespace

SimEventChannel::SimEventChannel(BrokerClient& broker, std::shared_ptr<MappedRegion> own_control,
                                 ControlPageCache& peers)
    : broker_(broker), own_control_(std::move(own_control)), peers_(peers) {
  epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) {
    const auto ec = last_errno();
    throw SetupError("epoll_create1: " + ec.message(), ec);
  }
}

SimEventChannel::~SimEventChannel() {
  std::vector<std::uint32_t> left;
  {
    std::lock_guard lock(mu_);
    for (const auto& [port, lp] : ports_) left.push_back(port);
  }
  for (const std::uint32_t p : left) (void)unbind(Port{p});
}

Result<Port> SimEventChannel::add_port(Result<BrokerResponse> resp) {
  if (!resp) return resp.error();
  if (resp->fds.size() != 1 || resp->reply.port == 0 || resp->reply.port >= kMaxPortsPerDomain)
    return errno_code(EPROTO);
  const std::uint32_t port = resp->reply.port;
  std::lock_guard lock(mu_);
  if (auto ec =
          epoll_set(epoll_.get(), EPOLL_CTL_ADD, resp->fds[0].get(), EPOLLIN | EPOLLET, port)) {
    auto req = make_request(BrokerOp::evtchn_unbind);
    req.port = port;
    (void)broker_.call(req);
    return ec;
  }
  LocalPort lp;
  lp.eventfd = std::move(resp->fds[0]);
  ports_.insert_or_assign(port, std::move(lp));
  return Port{port};
}

Result<Port> SimEventChannel::bind_unbound(DomId remote) {
  auto req = make_request(BrokerOp::evtchn_alloc_unbound);
  req.domid = remote.value();
  return add_port(broker_.call(req));
}

Result<Port> SimEventChannel::bind_interdomain(DomId remote, Port remote_port) {
  auto req = make_request(BrokerOp::evtchn_bind_interdomain);
  req.domid = remote.value();
  req.port = remote_port.value();
  auto port = add_port(broker_.call(req));
  if (!port) return port;
  // The peer is bound by definition: its eventfd is fetched now rather than at the first
  // notify(), so that every descriptor of a connect is taken while it connects, none when
  // its first event goes out (a backend's fd count then says what its vifs hold). Should
  // the broker not answer, notify() asks again.
  std::lock_guard lock(mu_);
  if (auto it = ports_.find(port->value()); it != ports_.end())
    (void)refresh_peer(port->value(), it->second);
  return port;
}

std::error_code SimEventChannel::refresh_peer(std::uint32_t local, LocalPort& lp) {
  auto req = make_request(BrokerOp::evtchn_peer);
  req.port = local;
  auto resp = broker_.call(req);
  if (!resp) return resp.error();
  lp.peer_fd.reset();
  lp.peer_control.reset();
  if (resp->fds.size() == 2) {
    if (resp->reply.port == 0 || resp->reply.port >= kMaxPortsPerDomain) return errno_code(EPROTO);
    auto ctl = peers_.get(DomId{resp->reply.domid}, resp->fds[1]);
    if (!ctl) return ctl.error();
    lp.peer_fd = std::move(resp->fds[0]);
    lp.peer_port = resp->reply.port;
    lp.peer_control = std::move(*ctl);
  }
  lp.gen = resp->reply.bind_gen;
  lp.peer_known = true;
  return {};
}

std::error_code SimEventChannel::notify(Port local) {
  std::lock_guard lock(mu_);
  auto it = ports_.find(local.value());
  if (it == ports_.end()) return errno_code(EINVAL);
  LocalPort& lp = it->second;
  auto* own = own_control_->as<DomainControl>();
  // ORDERING: acquire pairs with the broker's release increment of bind_gen after it
  // changed the binding; a stale cache is refreshed before we write anywhere.
  const std::uint32_t gen =
      shared_u32(own->ports[local.value()].bind_gen).load(std::memory_order_acquire);
  if (!lp.peer_known || lp.gen != gen) {
    if (auto ec = refresh_peer(local.value(), lp)) return ec;
  }
  if (!lp.peer_fd) return {};  // ECS_UNBOUND: Xen drops the notification silently

  auto* peer = lp.peer_control->as<DomainControl>();
  PortControl& pc = peer->ports[lp.peer_port];
  auto stalled = shared_u32(peer->stalled);
  if (stalled.load(std::memory_order_seq_cst) != 0) {
    // Held for the stalled domain. If the broker unstalled it meanwhile, it may already
    // have scanned `held`: take the bit back and deliver ourselves (exchange: only one of
    // us delivers).
    shared_u32(pc.held).store(1, std::memory_order_seq_cst);
    if (stalled.load(std::memory_order_seq_cst) == 0 &&
        shared_u32(pc.held).exchange(0, std::memory_order_seq_cst) != 0)
      signal_eventfd(lp.peer_fd.get());
    return {};
  }
  auto drop = shared_u32(pc.drop);
  std::uint32_t d = drop.load(std::memory_order_relaxed);
  while (d != 0 && !drop.compare_exchange_weak(d, d - 1, std::memory_order_relaxed)) {
  }
  if (d != 0) return {};  // lost, as injected
  signal_eventfd(lp.peer_fd.get());
  return {};
}

Result<std::optional<Port>> SimEventChannel::pending() {
  std::lock_guard lock(mu_);
  for (;;) {
    if (ready_i_ == ready_n_) {
      if (ready_was_short_ && ready_n_ != 0) {
        // The kernel had no more than these a moment ago: "none" without a syscall.
        ready_n_ = ready_i_ = 0;
        return std::optional<Port>{};
      }
      const int n = ::epoll_wait(epoll_.get(), ready_, kReadyBatch, 0);
      ready_n_ = ready_i_ = 0;
      if (n < 0) return errno == EINTR ? Result<std::optional<Port>>(std::nullopt) : last_errno();
      if (n == 0) return std::optional<Port>{};
      ready_n_ = n;
      ready_was_short_ = n < kReadyBatch;
    }
    const std::uint32_t port = ready_[ready_i_++].data.u32;
    auto it = ports_.find(port);
    if (it == ports_.end()) continue;  // unbound meanwhile
    LocalPort& lp = it->second;
    std::uint64_t count;
    // Clears the pending bit. Nothing to read: the edge was already taken with an earlier read.
    if (::read(lp.eventfd.get(), &count, sizeof(count)) != sizeof(count)) continue;
    if (lp.masked) {
      lp.pending_while_masked = true;
      continue;
    }
    lp.masked = true;
    return std::optional<Port>{Port{port}};
  }
}

std::error_code SimEventChannel::unmask(Port local) {
  std::lock_guard lock(mu_);
  auto it = ports_.find(local.value());
  if (it == ports_.end()) return errno_code(EINVAL);
  LocalPort& lp = it->second;
  lp.masked = false;
  if (lp.pending_while_masked) {
    lp.pending_while_masked = false;
    signal_eventfd(lp.eventfd.get());  // a fresh edge: reported by the next pending()
  }
  return {};
}

std::error_code SimEventChannel::unbind(Port local) {
  std::lock_guard lock(mu_);
  auto it = ports_.find(local.value());
  if (it == ports_.end()) return errno_code(EINVAL);
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.eventfd.get(), nullptr);
  ports_.erase(it);
  auto req = make_request(BrokerOp::evtchn_unbind);
  req.port = local.value();
  auto resp = broker_.call(req);
  return resp ? std::error_code{} : resp.error();
}

}  // namespace unetback::hv::sim
