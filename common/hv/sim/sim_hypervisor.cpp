#include "common/hv/sim/sim_hypervisor.hpp"

#include "common/hv/sim/broker_client.hpp"
#include "common/hv/sim/control_page_cache.hpp"
#include "common/hv/sim/sim_event_channel.hpp"
#include "common/hv/sim/sim_grant_sharer.hpp"
#include "common/hv/sim/sim_grant_table.hpp"
#include "common/hv/xen/xen_xenstore.hpp"

namespace unetback::hv {

using sim::BrokerOp;
using sim::make_request;

namespace {

std::error_code status_of(const Result<sim::BrokerResponse>& r) {
  return r ? std::error_code{} : r.error();
}

}  // namespace

SimHypervisor::SimHypervisor(std::string world_dir, const HypervisorOptions& opts)
    : dir_(std::move(world_dir)) {
  broker_ = std::make_unique<sim::BrokerClient>(dir_ + "/" + std::string(sim::kBrokerSocketName));
  peers_ = std::make_unique<sim::ControlPageCache>();

  sim::BrokerRequest req;
  if (opts.role == Role::backend && opts.domid && opts.domid->value() != 0) {
    // A backend in a driver domain (unetback-xl create NAME --driver-domain).
    req = make_request(BrokerOp::claim_domain);
    req.domid = opts.domid->value();
    req.arg0 = sim::kClaimAsBackend;
  } else if (opts.role == Role::backend) {
    req = make_request(BrokerOp::register_dom0);
  } else if (opts.domid) {
    req = make_request(BrokerOp::claim_domain);
    req.domid = opts.domid->value();
  } else {
    req = make_request(BrokerOp::register_domain, opts.name);
  }
  auto resp = broker_->call(req);
  if (!resp) {
    throw SetupError(
        "xensim at " + broker_->socket_path() + " refused " +
        std::string(sim::broker_op_name(req.op)) +
        (opts.domid ? " of domain " + std::to_string(opts.domid->value()) : "") + ": " +
        resp.error().message() +
        (opts.role == Role::backend && resp.error() == std::errc::operation_not_permitted
             ? " (a backend outside dom0 runs in a driver domain: unetback-xl "
               "create NAME --driver-domain)"
             : ""));
  }
  self_ = DomId{resp->reply.domid};
  auto& fds = resp->fds;
  if (fds.empty()) throw SetupError("xensim sent no control page");
  auto ctl = sim::map_control_page(fds.back());
  if (!ctl) throw SetupError("cannot map the xensim control page: " + ctl.error().message());
  own_control_ = std::make_shared<sim::MappedRegion>(std::move(*ctl));

  if (opts.role == Role::backend) {
    copy_batch_ = opts.copy_batch;
    table_ = std::make_unique<sim::SimGrantTable>(*broker_, self_, opts.copy_batch);
  } else {
    if (fds.size() != 3) throw SetupError("xensim sent no domain memory");
    sharer_ = std::make_unique<sim::SimGrantSharer>(self_, fds[0], resp->reply.nr_frames, fds[1],
                                                    resp->reply.nr_grant_entries);
  }
}

SimHypervisor::~SimHypervisor() = default;

GrantTable& SimHypervisor::grant_table() {
  if (!table_) throw SetupError("xensim: a frontend-role handle has no grant table");
  return *table_;
}

std::unique_ptr<GrantTable> SimHypervisor::open_grant_table() {
  if (!table_) throw SetupError("xensim: a frontend-role handle has no grant table");
  return std::make_unique<sim::SimGrantTable>(*broker_, self_, copy_batch_);
}

GrantSharer& SimHypervisor::grant_sharer() {
  return sim_grant_sharer();
}

sim::SimGrantSharer& SimHypervisor::sim_grant_sharer() {
  if (!sharer_) throw SetupError("xensim: a backend-role handle (dom0) has no memory to share");
  return *sharer_;
}

std::unique_ptr<EventChannel> SimHypervisor::open_event_channel() {
  opened_event_channels_ = true;
  return std::make_unique<sim::SimEventChannel>(*broker_, own_control_, *peers_);
}

std::unique_ptr<XenStore> SimHypervisor::open_xenstore() {
  return std::make_unique<LibXenStore>(dir_ + "/dom" + std::to_string(self_.value()) + ".sock");
}

bool SimHypervisor::domain_exists(DomId domid) {
  if (serves_) return domid == *serves_;
  auto req = make_request(BrokerOp::domain_exists);
  req.domid = domid.value();
  auto resp = broker_->call(req);
  return resp && resp->reply.arg != 0;
}

std::error_code SimHypervisor::restrict_to_domain(DomId serve) {
  if (serve == kDom0 || is_reserved(serve)) return errno_code(EINVAL);
  if (serves_) return errno_code(EACCES);
  if (opened_event_channels_) return errno_code(EBUSY);
  auto req = make_request(BrokerOp::restrict_client);
  req.domid = serve.value();
  if (auto ec = status_of(broker_->call(req))) return ec;
  serves_ = serve;
  return {};
}

Result<DomId> SimHypervisor::create_domain(std::string_view name, std::uint32_t nr_frames,
                                           bool driver_domain) {
  auto req = make_request(BrokerOp::create_domain, name);
  req.arg0 = nr_frames;
  req.arg1 = driver_domain ? sim::kCreateDriverDomain : 0;
  auto resp = broker_->call(req);
  if (!resp) return resp.error();
  return DomId{resp->reply.domid};
}

std::error_code SimHypervisor::destroy_domain(DomId domid) {
  auto req = make_request(BrokerOp::destroy_domain);
  req.domid = domid.value();
  return status_of(broker_->call(req));
}

std::error_code SimHypervisor::inject_revoke_grant(DomId granter, GrantRef ref) {
  auto req = make_request(BrokerOp::fault_revoke_grant);
  req.domid = granter.value();
  req.arg0 = ref.value();
  return status_of(broker_->call(req));
}

std::error_code SimHypervisor::inject_corrupt_grant(DomId granter, GrantRef ref, DomId domid,
                                                    std::uint32_t frame) {
  auto req = make_request(BrokerOp::fault_corrupt_grant);
  req.domid = granter.value();
  req.arg0 = ref.value();
  req.domid2 = domid.value();
  req.arg1 = frame;
  return status_of(broker_->call(req));
}

std::error_code SimHypervisor::inject_drop_events(DomId domid, Port port, std::uint32_t count) {
  auto req = make_request(BrokerOp::fault_drop_events);
  req.domid = domid.value();
  req.port = port.value();
  req.arg0 = count;
  return status_of(broker_->call(req));
}

std::error_code SimHypervisor::inject_stall(DomId domid, bool stalled) {
  auto req = make_request(BrokerOp::fault_stall_domain);
  req.domid = domid.value();
  req.arg0 = stalled ? 1 : 0;
  return status_of(broker_->call(req));
}

std::unique_ptr<Hypervisor> open_sim_hypervisor(std::string world_dir,
                                                const HypervisorOptions& opts) {
  return std::make_unique<SimHypervisor>(std::move(world_dir), opts);
}

}  // namespace unetback::hv
