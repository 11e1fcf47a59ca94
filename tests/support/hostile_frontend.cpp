#include "tests/support/hostile_frontend.hpp"

#include <atomic>
#include <thread>

#include "common/hv/sim/sim_grant_sharer.hpp"
#include "tools/xl/toolstack.hpp"

namespace unetback::test {

using namespace std::chrono_literals;

namespace {

/// Grant refs scanned by grants_in_use(): far more than xensim gives a domain, and in_use()
/// answers "unused" past the table's end.
constexpr std::uint32_t kScannedGrantRefs = 1U << 16;

}  // namespace

HostileFrontend::HostileFrontend(const std::string& world_dir, std::string name,
                                 hv::SimHypervisor* injector)
    : injector_(injector) {
  hv::HypervisorOptions opts;
  opts.role = hv::Role::frontend;
  opts.name = std::move(name);
  hv_ = std::make_unique<hv::SimHypervisor>(world_dir, opts);
  dom_ = hv_->self();
  xs_ = hv_->open_xenstore();
  evtchn_ = hv_->open_event_channel();
}

HostileFrontend::~HostileFrontend() {
  vanish();
}

void HostileFrontend::attach(DevId devid, DomId backend) {
  fe_dir_ = toolstack::frontend_path(dom_, devid);
  be_dir_ = toolstack::backend_path(backend, dom_, devid);
}

std::error_code HostileFrontend::write(std::string_view key, std::string_view value) {
  if (!xs_) return std::make_error_code(std::errc::no_such_device);
  return xs_->write(fe_dir_ + "/" + std::string(key), value);
}

std::error_code HostileFrontend::remove(std::string_view key) {
  if (!xs_) return std::make_error_code(std::errc::no_such_device);
  return xs_->rm(fe_dir_ + "/" + std::string(key));
}

std::optional<std::string> HostileFrontend::read_backend(std::string_view key) {
  if (!xs_) return std::nullopt;
  auto v = xs_->read(be_dir_ + "/" + std::string(key));
  if (!v) return std::nullopt;
  return *v;
}

std::error_code HostileFrontend::wait_backend_state(std::string_view state,
                                                    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (read_backend("state") == state) return {};
    std::this_thread::sleep_for(5ms);
  }
  return std::make_error_code(std::errc::timed_out);
}

std::error_code HostileFrontend::make_rings(RingIdx start) {
  if (!hv_) return std::make_error_code(std::errc::no_such_device);
  auto& sharer = hv_->grant_sharer();
  auto t = sharer.share(kDom0, 1, hv::Access::read_write);
  if (!t) return t.error();
  auto r = sharer.share(kDom0, 1, hv::Access::read_write);
  if (!r) return r.error();
  tx_page_ = std::move(*t);
  rx_page_ = std::move(*r);
  tx_.emplace(TxFrontRing::init(tx_page_.page(0), start));
  rx_.emplace(RxFrontRing::init(rx_page_.page(0), start));
  auto p = evtchn_->bind_unbound(kDom0);
  if (!p) return p.error();
  port_ = *p;
  return {};
}

Result<Port> HostileFrontend::alloc_port(DomId remote) {
  if (!evtchn_) return std::make_error_code(std::errc::no_such_device);
  return evtchn_->bind_unbound(remote);
}

GrantRef HostileFrontend::tx_ring_ref() const {
  return tx_page_.ref(0);
}
GrantRef HostileFrontend::rx_ring_ref() const {
  return rx_page_.ref(0);
}

std::error_code HostileFrontend::publish(const std::map<std::string, std::string>& overrides,
                                         std::optional<std::string_view> state) {
  std::map<std::string, std::string> keys{
      {"tx-ring-ref", std::to_string(tx_ring_ref().value())},
      {"rx-ring-ref", std::to_string(rx_ring_ref().value())},
      {"event-channel", std::to_string(port_.value())},
      {"request-rx-copy", "1"},
      {"feature-rx-notify", "1"},
  };
  for (const auto& [k, v] : overrides) keys[k] = v;
  for (const auto& [k, v] : keys) {
    const auto ec = v.empty() ? remove(k) : write(k, v);
    if (ec && !v.empty()) return ec;
  }
  if (state) return set_state(*state);
  return {};
}

ring::SharedRingHeader& HostileFrontend::tx_header() const {
  return *reinterpret_cast<ring::SharedRingHeader*>(tx_page_.page(0));
}
ring::SharedRingHeader& HostileFrontend::rx_header() const {
  return *reinterpret_cast<ring::SharedRingHeader*>(rx_page_.page(0));
}

std::byte* HostileFrontend::tx_slot(std::uint32_t i) const {
  constexpr std::size_t kEntry = sizeof(TxFrontRing::Entry);
  return tx_page_.page(0) + ring::kRingHeaderSize + (i & (TxFrontRing::size() - 1)) * kEntry;
}

void HostileFrontend::push_tx() {
  (void)tx_->push_requests();
  notify();
}

void HostileFrontend::set_tx_req_prod(std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(tx_header().req_prod).store(v, std::memory_order_release);
}

std::vector<wire::TxResponse> HostileFrontend::take_tx_responses() {
  std::vector<wire::TxResponse> out;
  if (!tx_) return out;
  std::uint32_t n = tx_->unconsumed_responses();
  if (n > TxFrontRing::size()) n = TxFrontRing::size();  // a backend is hostile too, in principle
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(tx_->take_response());
  return out;
}

bool HostileFrontend::wait_tx_responses(std::vector<wire::TxResponse>& out, std::size_t n,
                                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto& r : take_tx_responses()) out.push_back(r);
    if (out.size() >= n) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
}

std::error_code HostileFrontend::post_rx(std::size_t n, hv::Access access) {
  for (std::size_t i = 0; i < n; ++i) {
    auto page = grant_page(access);
    if (!page) return page.error();
    wire::RxRequest req{};
    req.id = next_rx_id_++;
    req.gref = page->ref.value();
    rx_->put_request(req);
  }
  (void)rx_->push_requests();
  notify();
  return {};
}

std::vector<wire::RxResponse> HostileFrontend::take_rx_responses() {
  std::vector<wire::RxResponse> out;
  if (!rx_) return out;
  std::uint32_t n = rx_->unconsumed_responses();
  if (n > RxFrontRing::size()) n = RxFrontRing::size();
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(rx_->take_response());
  return out;
}

Result<HostileFrontend::Page> HostileFrontend::grant_page(hv::Access access) {
  if (!hv_) return std::make_error_code(std::errc::no_such_device);
  auto p = hv_->grant_sharer().share(kDom0, 1, access);
  if (!p) return p.error();
  const Page page{p->ref(0), p->page(0)};
  pages_.insert_or_assign(page.ref.value(), std::move(*p));
  return page;
}

void HostileFrontend::revoke(GrantRef ref) {
  pages_.erase(ref.value());
}

std::error_code HostileFrontend::revoke_under_backend(GrantRef ref) {
  if (injector_ == nullptr) return std::make_error_code(std::errc::operation_not_permitted);
  return injector_->inject_revoke_grant(dom_, ref);
}

std::error_code HostileFrontend::corrupt_grant(GrantRef ref, DomId domid, std::uint32_t frame) {
  if (injector_ == nullptr) return std::make_error_code(std::errc::operation_not_permitted);
  return injector_->inject_corrupt_grant(dom_, ref, domid, frame);
}

std::size_t HostileFrontend::grants_in_use() const {
  if (!hv_) return 0;
  const auto& sharer = hv_->sim_grant_sharer();
  std::size_t n = 0;
  for (std::uint32_t r = 0; r < kScannedGrantRefs; ++r)
    if (sharer.in_use(GrantRef{r}) == hv::GrantUse::in_use) ++n;
  return n;
}

void HostileFrontend::notify(std::size_t times) {
  if (!evtchn_ || port_.value() == 0) return;
  for (std::size_t i = 0; i < times; ++i) (void)evtchn_->notify(port_);
}

void HostileFrontend::notify_port(Port port, std::size_t times) {
  if (!evtchn_ || port.value() == 0) return;
  for (std::size_t i = 0; i < times; ++i) (void)evtchn_->notify(port);
}

void HostileFrontend::vanish() {
  if (!hv_) return;
  // Everything the SimHypervisor handed out goes first (its contract); the domain's death is
  // the broker connection closing with it.
  tx_.reset();
  rx_.reset();
  pages_.clear();
  tx_page_.reset();
  rx_page_.reset();
  if (evtchn_ && port_.value() != 0) (void)evtchn_->unbind(port_);
  port_ = Port{};
  evtchn_.reset();
  xs_.reset();
  hv_.reset();
}

}  // namespace unetback::test
