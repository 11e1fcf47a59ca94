#include "backend/vif/ctrl_ring.hpp"

#include <thread>

#include "common/event/loop_handler.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {
namespace {

void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // one writer
}

}  // namespace

template <typename F>
void CtrlRing::guarded(F&& f) noexcept {
  event::run_guarded(std::forward<F>(f),
                     [this](const char* what) noexcept { handler_threw(what); });
}

template <typename F>
void CtrlRing::post(F&& f) {
  loop_.post([this, t = event::HandlerToken(outstanding_), f = std::forward<F>(f)]() mutable {
    guarded(f);
  });
}

void CtrlRing::handler_threw(const char* what) noexcept {
  // As a protocol violation: this vif stops, the loop and the other vifs on it go on.
  stopped_ = true;
  sd_.cancel();
  try {
    if (on_fatal_) on_fatal_(std::string("ctrl ring: internal error: ") + what);
  } catch (...) {
  }
}

CtrlRing::CtrlRing(event::EventLoop& loop, std::string log_prefix,
                   std::function<void(std::string)> on_fatal)
    : loop_(loop), prefix_(std::move(log_prefix)), on_fatal_(std::move(on_fatal)), sd_(loop) {}

CtrlRing::~CtrlRing() {
  // stop() ran. The port goes before its channel handle, the page before its table.
  port_.reset();
  page_.reset();
}

Result<std::unique_ptr<CtrlRing>> CtrlRing::open(event::EventLoop& loop, hv::Hypervisor& hv,
                                                 DomId frontend, GrantRef ring_ref, Port evtchn,
                                                 std::uint32_t num_queues,
                                                 std::shared_ptr<SharedHashSettings> publish,
                                                 std::string log_prefix,
                                                 std::function<void(std::string)> on_fatal) {
  std::unique_ptr<CtrlRing> r(new CtrlRing(loop, std::move(log_prefix), std::move(on_fatal)));
  r->table_ = hv.open_grant_table();
  r->evtchn_ = hv.open_event_channel();
  const GrantRef refs[] = {ring_ref};
  auto page = r->table_->map(frontend, refs, hv::Access::read_write);
  if (!page) return page.error();
  r->page_ = std::move(*page);
  // As for the data rings: a page whose frontend claims more requests than fit is refused.
  auto ring = ring::CtrlBackRing::attach(r->page_.data());
  if (!ring) return ring.error();
  r->ring_ = *ring;
  auto port = r->evtchn_->bind_interdomain(frontend, evtchn);
  if (!port) return port.error();
  r->port_ = hv::BoundPort(*r->evtchn_, *port);
  r->handler_.emplace(*r->table_, frontend, num_queues, std::move(publish));
  r->sd_.watch(r->evtchn_->fd());  // SetupError with epoll_ctl's errno
  return r;
}

void CtrlRing::start() {
  post([this] {
    do_wait();
    run();  // requests may have been queued before we bound
  });
}

void CtrlRing::stop() {
  post([this] {
    stopped_ = true;
    sd_.cancel();
  });
  while (outstanding_.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void CtrlRing::do_wait() {
  sd_.async_wait([this, t = event::HandlerToken(outstanding_)](const std::error_code& ec) {
    guarded([&] { on_event(ec); });
  });
}

void CtrlRing::on_event(const std::error_code& ec) {
  if (stopped_ || ec) return;
  bump(counters_.events);
  for (;;) {
    auto p = evtchn_->pending();
    if (!p) break;  // the fd stays ready: the next wait looks again
    if (!*p) {
      sd_.drained();
      break;
    }
  }
  run();
  if (stopped_) return;
  (void)port_.unmask();
  do_wait();
}

void CtrlRing::run() {
  if (stopped_) return;
  std::uint32_t answered = 0;
  for (;;) {
    if (ring_->request_prod_overflow()) {
      stopped_ = true;
      sd_.cancel();
      if (on_fatal_) on_fatal_("ctrl ring: impossible number of requests");
      return;
    }
    std::uint32_t n = ring_->unconsumed_requests();
    while (n-- != 0 && answered < kRequestsPerPass) {
      const auto req = ring_->take_request();  // RING_COPY_REQUEST: read once
      const auto rsp = handler_->handle(req);
      bump(counters_.requests);
      if (rsp.status != XEN_NETIF_CTRL_STATUS_SUCCESS) bump(counters_.failed);
      ring_->put_response(rsp);
      ++answered;
    }
    if (answered >= kRequestsPerPass) break;
    if (!ring_->final_check_for_requests()) break;
  }
  if (ring_->push_responses()) (void)port_.notify();
  if (answered >= kRequestsPerPass && !run_posted_) {
    // Work left: the other handlers on this thread go first.
    run_posted_ = true;
    post([this] {
      run_posted_ = false;
      run();
    });
  }
}

}  // namespace unetback::vif
