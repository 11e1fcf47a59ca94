#include "tests/integration/netfront/test_backend.hpp"

#include <algorithm>
#include <cstring>
#include <poll.h>

namespace unetback::test {

namespace {
std::string num(std::uint64_t v) {
  return std::to_string(v);
}
}  // namespace

TestBackend::TestBackend(hv::SimHypervisor& dom0, DomId frontend, DevId devid)
    : dom0_(dom0),
      fe_(frontend),
      devid_(devid),
      xs_(dom0.open_xenstore()),
      be_dir_("/local/domain/0/backend/vif/" + num(frontend.value()) + "/" + num(devid.value())),
      fe_dir_("/local/domain/" + num(frontend.value()) + "/device/vif/" + num(devid.value())),
      channel_(dom0.open_event_channel()) {}

TestBackend::~TestBackend() {
  detach();
}

void TestBackend::create_device() {
  auto must = [](std::error_code ec) { EXPECT_FALSE(ec) << ec.message(); };
  must(xs_->write(be_dir_ + "/frontend", fe_dir_));
  must(xs_->write(be_dir_ + "/frontend-id", num(fe_.value())));
  must(xs_->write(be_dir_ + "/online", "1"));
  must(xs_->write(be_dir_ + "/state", "1"));
  must(xs_->write(fe_dir_ + "/backend", be_dir_));
  must(xs_->write(fe_dir_ + "/backend-id", "0"));
  must(xs_->write(fe_dir_ + "/state", "1"));
  // libxl: the backend owns its directory and the guest may read it; the guest owns its own.
  const hv::XsPerm be_perms[] = {{kDom0, hv::XsPerm::Kind::none}, {fe_, hv::XsPerm::Kind::read}};
  const hv::XsPerm fe_perms[] = {{fe_, hv::XsPerm::Kind::none}, {kDom0, hv::XsPerm::Kind::read}};
  for (const char* k : {"", "/frontend", "/frontend-id", "/online", "/state"})
    must(xs_->set_perms(be_dir_ + k, be_perms));
  for (const char* k : {"", "/backend", "/backend-id", "/state"})
    must(xs_->set_perms(fe_dir_ + k, fe_perms));
}

void TestBackend::advertise(const BackendAdvert& a) {
  const hv::XsPerm perms[] = {{kDom0, hv::XsPerm::Kind::none}, {fe_, hv::XsPerm::Kind::read}};
  auto put = [&](const std::string& k, const std::string& v) {
    EXPECT_FALSE(xs_->write(be_dir_ + "/" + k, v));
    EXPECT_FALSE(xs_->set_perms(be_dir_ + "/" + k, perms));
  };
  put("feature-rx-copy", a.rx_copy ? "1" : "0");
  put("feature-sg", a.sg ? "1" : "0");
  put("feature-gso-tcpv4", a.gso_tcpv4 ? "1" : "0");
  put("feature-gso-tcpv6", a.gso_tcpv6 ? "1" : "0");
  put("feature-ipv6-csum-offload", a.ipv6_csum ? "1" : "0");
  put("feature-split-event-channels", a.split ? "1" : "0");
  if (a.max_queues) put("multi-queue-max-queues", num(*a.max_queues));
  if (a.ctrl_ring) put("feature-ctrl-ring", "1");
  set_state(2);
}

void TestBackend::set_state(int state) {
  EXPECT_FALSE(xs_->write(be_dir_ + "/state", std::to_string(state)));
}

int TestBackend::frontend_state() {
  auto s = xs_->read(fe_dir_ + "/state");
  if (!s) return -1;
  return std::atoi(s->c_str());
}

bool TestBackend::wait_frontend_state(int state, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (frontend_state() == state) return true;
    ::poll(nullptr, 0, 5);
  }
  return frontend_state() == state;
}

std::map<std::string, std::string> TestBackend::frontend_keys() {
  std::map<std::string, std::string> m;
  auto names = xs_->directory(fe_dir_);
  if (!names) return m;
  for (const std::string& n : *names) {
    if (auto v = xs_->read(fe_dir_ + "/" + n); v && !v->empty()) m[n] = *v;
    if (auto sub = xs_->directory(fe_dir_ + "/" + n)) {
      for (const std::string& c : *sub)
        if (auto v = xs_->read(fe_dir_ + "/" + n + "/" + c)) m[n + "/" + c] = *v;
    }
  }
  return m;
}

::testing::AssertionResult TestBackend::attach(std::uint32_t q) {
  auto keys = frontend_keys();
  const std::string prefix = keys.count("tx-ring-ref") ? "" : "queue-" + num(q) + "/";
  auto get = [&](const std::string& k) -> std::optional<std::uint32_t> {
    auto it = keys.find(prefix + k);
    if (it == keys.end()) return std::nullopt;
    return hv::parse_xs_uint<std::uint32_t>(it->second);
  };
  const auto txr = get("tx-ring-ref"), rxr = get("rx-ring-ref");
  if (!txr || !rxr) return ::testing::AssertionFailure() << "no ring refs";
  const GrantRef tref{*txr}, rref{*rxr};
  auto tm = dom0_.grant_table().map(fe_, std::span(&tref, 1), hv::Access::read_write);
  auto rm = dom0_.grant_table().map(fe_, std::span(&rref, 1), hv::Access::read_write);
  if (!tm || !rm) return ::testing::AssertionFailure() << "ring map failed";
  tx_ring_page_ = std::move(*tm);
  rx_ring_page_ = std::move(*rm);
  auto ta = ring::TxBackRing::attach(tx_ring_page_.data());
  auto ra = ring::RxBackRing::attach(rx_ring_page_.data());
  if (!ta || !ra) return ::testing::AssertionFailure() << "ring attach refused";
  tx_ = *ta;
  rx_ = *ra;
  auto bind = [&](std::uint32_t port) -> std::optional<hv::BoundPort> {
    auto p = channel_->bind_interdomain(fe_, Port{port});
    if (!p) return std::nullopt;
    return hv::BoundPort(*channel_, *p);
  };
  if (auto single = get("event-channel")) {
    auto p = bind(*single);
    if (!p) return ::testing::AssertionFailure() << "bind failed";
    tx_port_ = std::move(*p);
  } else {
    const auto t = get("event-channel-tx"), r = get("event-channel-rx");
    if (!t || !r) return ::testing::AssertionFailure() << "no event channels";
    auto tp = bind(*t);
    auto rp = bind(*r);
    if (!tp || !rp) return ::testing::AssertionFailure() << "bind failed";
    tx_port_ = std::move(*tp);
    rx_port_ = std::move(*rp);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult TestBackend::attach_ctrl() {
  auto keys = frontend_keys();
  const auto ref = keys.find("ctrl-ring-ref");
  const auto port = keys.find("event-channel-ctrl");
  if (ref == keys.end() || port == keys.end())
    return ::testing::AssertionFailure() << "no ctrl-ring-ref / event-channel-ctrl";
  const auto r = hv::parse_xs_uint<std::uint32_t>(ref->second);
  const auto p = hv::parse_xs_uint<std::uint32_t>(port->second);
  if (!r || !p) return ::testing::AssertionFailure() << "bad control ring keys";
  const GrantRef gref{*r};
  auto m = dom0_.grant_table().map(fe_, std::span(&gref, 1), hv::Access::read_write);
  if (!m) return ::testing::AssertionFailure() << "control ring map failed";
  ctrl_ring_page_ = std::move(*m);
  auto ring = ring::CtrlBackRing::attach(ctrl_ring_page_.data());
  if (!ring) return ::testing::AssertionFailure() << "control ring attach refused";
  ctrl_ = *ring;
  auto bound = channel_->bind_interdomain(fe_, Port{*p});
  if (!bound) return ::testing::AssertionFailure() << "control channel bind failed";
  ctrl_port_ = hv::BoundPort(*channel_, *bound);
  return ::testing::AssertionSuccess();
}

std::optional<wire::CtrlRequest> TestBackend::take_ctrl() {
  if (!ctrl_ || ctrl_->unconsumed_requests() == 0) return std::nullopt;
  return ctrl_->take_request();
}

std::optional<wire::CtrlRequest> TestBackend::wait_ctrl(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto req = take_ctrl()) return req;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    ::poll(nullptr, 0, 1);
  }
}

void TestBackend::answer_ctrl(const wire::CtrlRequest& req, std::uint32_t status) {
  wire::CtrlResponse rsp{};
  rsp.id = req.id;
  rsp.type = req.type;
  rsp.status = status;
  ctrl_->put_response(rsp);
  if (ctrl_->push_responses()) (void)ctrl_port_.notify();
}

std::vector<std::byte> TestBackend::read_granted(GrantRef ref, std::size_t len) {
  std::vector<std::byte> out(len);
  hv::GrantCopySegment seg{hv::GrantCopyPtr::granted(fe_, ref, 0),
                           hv::GrantCopyPtr::local(out.data()), static_cast<std::uint16_t>(len),
                           99};
  dom0_.grant_table().copy(std::span(&seg, 1));
  EXPECT_EQ(seg.status, GNTST_okay);
  return out;
}

void TestBackend::detach() {
  ctrl_.reset();
  ctrl_ring_page_.reset();
  ctrl_port_.reset();
  tx_.reset();
  rx_.reset();
  tx_ring_page_.reset();
  rx_ring_page_.reset();
  held_.clear();
  held_refs_.clear();
  tx_port_.reset();
  rx_port_.reset();
}

void TestBackend::notify_tx() {
  (void)tx_port_.notify();
}
void TestBackend::notify_rx() {
  (void)(rx_port_.bound() ? rx_port_ : tx_port_).notify();
}

void TestBackend::push_tx() {
  if (tx_->push_responses()) notify_tx();
}

std::optional<TxGot> TestBackend::receive_tx(bool hold_map, std::int16_t status, bool respond) {
  if (!tx_ || tx_->unconsumed_requests() == 0) return std::nullopt;
  TxGot got;
  const wire::TxRequest first = tx_->take_request();
  got.requests.push_back(first);
  if (wire::tx_flags(first).has(wire::TxFlag::extra_info)) {
    do {
      got.extras.push_back(tx_->take_request_as<wire::ExtraInfo>());
    } while ((got.extras.back().flags & XEN_NETIF_EXTRA_FLAG_MORE) != 0 &&
             tx_->unconsumed_requests() > 0);
    got.extra = got.extras.front();
  }
  wire::TxRequest cur = first;
  while (wire::tx_flags(cur).has(wire::TxFlag::more_data) && tx_->unconsumed_requests() > 0) {
    cur = tx_->take_request();
    got.requests.push_back(cur);
  }
  // netif.h: the first request's size is the packet's; its own share is what is left.
  std::uint32_t rest = 0;
  for (std::size_t i = 1; i < got.requests.size(); ++i) rest += got.requests[i].size;
  std::vector<std::uint32_t> sizes;
  sizes.push_back(first.size - rest);
  for (std::size_t i = 1; i < got.requests.size(); ++i) sizes.push_back(got.requests[i].size);
  std::uint32_t total = 0;
  for (auto s : sizes) total += s;
  got.bytes.resize(total);
  std::vector<hv::GrantCopySegment> segs;
  std::uint32_t at = 0;
  for (std::size_t i = 0; i < got.requests.size(); ++i) {
    if (sizes[i] == 0) continue;
    const auto& r = got.requests[i];
    segs.push_back({hv::GrantCopyPtr::granted(fe_, GrantRef{r.gref}, r.offset),
                    hv::GrantCopyPtr::local(got.bytes.data() + at),
                    static_cast<std::uint16_t>(sizes[i]), 99});
    at += sizes[i];
  }
  dom0_.grant_table().copy(segs);
  for (const auto& s : segs) got.copy_ok = got.copy_ok && s.status == GNTST_okay;
  if (hold_map) {
    const GrantRef ref{first.gref};
    auto m = dom0_.grant_table().map(fe_, std::span(&ref, 1), hv::Access::read_only);
    EXPECT_TRUE(m) << m.error().message();
    if (m) {
      held_.push_back(std::move(*m));
      held_refs_.push_back(ref);
    }
  }
  if (respond) {
    for (std::size_t i = 0; i < got.requests.size(); ++i) {
      wire::TxResponse rsp{};
      rsp.id = got.requests[i].id;
      rsp.status = status;
      tx_->put_response(rsp);
      for (std::size_t e = 0; i == 0 && e < got.extras.size(); ++e) {
        wire::TxResponse null{};
        null.status = NETIF_RSP_NULL;
        tx_->put_response(null);
      }
    }
    push_tx();
  }
  return got;
}

void TestBackend::raw_tx_response(std::uint16_t id, std::int16_t status) {
  wire::TxResponse rsp{};
  rsp.id = id;
  rsp.status = status;
  tx_->put_response(rsp);
  push_tx();
}

bool TestBackend::deliver_rx(std::span<const std::byte> frame, std::optional<netfront::RxGso> gso,
                             wire::RxFlags flags, std::uint16_t first_slot) {
  first_slot = std::clamp<std::uint16_t>(first_slot, 1, wire::kPageSize);
  const std::size_t first = std::min<std::size_t>(first_slot, frame.size());
  const std::uint32_t data_slots =
      frame.empty() ? 0
                    : 1 + static_cast<std::uint32_t>((frame.size() - first + wire::kPageSize - 1) /
                                                     wire::kPageSize);
  if (!rx_ || rx_->unconsumed_requests() < data_slots + (gso ? 1 : 0)) return false;
  std::size_t pos = 0;
  bool ok = true;
  for (std::uint32_t i = 0; i < data_slots; ++i) {
    const wire::RxRequest req = rx_->take_request();
    const auto n = static_cast<std::uint16_t>(
        std::min<std::size_t>(i == 0 ? first : wire::kPageSize, frame.size() - pos));
    hv::GrantCopySegment seg{hv::GrantCopyPtr::local(const_cast<std::byte*>(frame.data() + pos)),
                             hv::GrantCopyPtr::granted(fe_, GrantRef{req.gref}, 0), n, 99};
    dom0_.grant_table().copy(std::span(&seg, 1));
    ok = ok && seg.status == GNTST_okay;
    pos += n;
    wire::RxFlags f = i == 0 ? flags : wire::RxFlags{};
    if (pos < frame.size()) f |= wire::RxFlag::more_data;
    if (i == 0 && gso) f |= wire::RxFlag::extra_info;
    wire::RxResponse rsp{};
    rsp.id = req.id;
    rsp.offset = 0;
    rsp.flags = f.raw();
    rsp.status = static_cast<std::int16_t>(n);
    rx_->put_response(rsp);
    if (i == 0 && gso) {
      (void)rx_->take_request();  // the extra overlays the next slot's response
      wire::ExtraInfo e{};
      e.type = XEN_NETIF_EXTRA_TYPE_GSO;
      e.u.gso.size = gso->size;
      e.u.gso.type = static_cast<std::uint8_t>(gso->type);
      rx_->put_response_as(e);
    }
  }
  if (rx_->push_responses()) notify_rx();
  return ok;
}

bool TestBackend::deliver_raw_rx(std::vector<wire::RxResponse> responses, bool ids_as_given) {
  if (!rx_ || rx_->unconsumed_requests() < responses.size()) return false;
  for (auto& r : responses) {
    const wire::RxRequest req = rx_->take_request();
    if (!ids_as_given) r.id = req.id;
    rx_->put_response(r);
  }
  if (rx_->push_responses()) notify_rx();
  return true;
}

void TestBackend::corrupt_rx_rsp_prod(std::uint32_t extra) {
  auto* hdr = reinterpret_cast<ring::SharedRingHeader*>(rx_ring_page_.data());
  std::atomic_ref<std::uint32_t>(hdr->rsp_prod).fetch_add(extra, std::memory_order_release);
}

std::uint32_t TestBackend::drain_events() {
  std::uint32_t n = 0;
  for (;;) {
    auto p = channel_->pending();
    if (!p || !p->has_value()) break;
    ++n;
    (void)channel_->unmask(**p);
  }
  return n;
}

}  // namespace unetback::test
