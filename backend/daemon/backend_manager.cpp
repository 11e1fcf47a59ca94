#include "backend/daemon/backend_manager.hpp"

#include <cerrno>
#include <exception>
#include <utility>

#include "common/util/milestone.hpp"
#include "common/xenbus/xenbus_state.hpp"

namespace unetback::daemon {
namespace {

constexpr std::string_view kManagerLog = "manager";

std::optional<DevId> parse_devid(std::string_view s) {
  const auto v = hv::parse_xs_uint<std::uint32_t>(s);
  if (!v) return std::nullopt;
  return DevId{*v};
}

}  // namespace

BackendManager::BackendManager(hv::XenStore& xs, DomId self, vif::VifFactory& factory,
                               TunableStore& tunables, DomainExists domain_exists)
    : xs_(xs),
      self_(self),
      factory_(factory),
      tunables_(tunables),
      domain_exists_(std::move(domain_exists)),
      root_("/local/domain/" + std::to_string(self.value()) + "/backend/vif") {}

BackendManager::~BackendManager() = default;

std::error_code BackendManager::start() {
  if (auto ec = tunables_.start()) return ec;
  auto b = hv::XsWatch::add(xs_, root_, std::string(kBackendsToken));
  if (!b) return b.error();
  backends_watch_ = std::move(*b);
  // @releaseDomain fires when any domain dies; xenstored tells us no more, so every vif whose
  // frontend domain no longer exists is torn down (as Linux's xenbus does with its frontends).
  auto r = hv::XsWatch::add(xs_, "@releaseDomain", std::string(kReleaseToken));
  if (!r) return r.error();
  release_watch_ = std::move(*r);
  return {};
}

void BackendManager::adopt_found() {
  if (initial_scan_done_ || shut_down_) return;
  scan_backends();
}

bool BackendManager::process_events(std::size_t max_events) {
  for (std::size_t n = 0; n < max_events; ++n) {
    auto ev = xs_.read_watch();
    if (!ev) return false;
    if (xs_.connection_error()) return false;  // nothing can be answered any more
    if (shut_down_) continue;                  // drain: nothing reacts any more
    // The vif layer turns its own failures into that vif's error (Vif::connect); what is
    // left (memory running out while a handler builds a string) must not unwind the
    // daemon's loop and take every guest down: that event is dropped, and said so.
    try {
      dispatch(*ev);
      check_vifs();
    } catch (const std::exception& e) {
      log::write_limited(guest_log_limit_, log::Level::error, kManagerLog,
                         "watch event on " + log::printable(ev->path) + " failed: " + e.what());
    }
  }
  return true;
}

void BackendManager::dispatch(const hv::XsWatchEvent& ev) {
  if (tunables_.owns(ev)) {
    tunables_.handle_watch(ev);
  } else if (ev.token == kBackendsToken) {
    on_backends_event(ev.path);
  } else if (ev.token == kReleaseToken) {
    on_release_domain();
  } else {
    for (auto& [id, vif] : vifs_) {
      if (vif.xenbus->owns(ev)) {
        vif.xenbus->handle_watch(ev);
        break;
      }
    }
  }
}

void BackendManager::on_backends_event(const std::string& path) {
  if (path == root_) return scan_backends();
  if (path.size() <= root_.size() + 1 || !path.starts_with(root_) || path[root_.size()] != '/')
    return;
  // Only the first two components matter: <domid>[/<devid>[/<key>...]].
  const std::string_view rest = std::string_view(path).substr(root_.size() + 1);
  const auto slash = rest.find('/');
  const std::string dom_name(rest.substr(0, slash));
  if (slash == std::string_view::npos) return scan_domain_entry(dom_name, std::nullopt);
  const std::string_view dev = rest.substr(slash + 1);
  scan_domain_entry(dom_name, std::string(dev.substr(0, dev.find('/'))));
}

void BackendManager::scan_backends() {
  auto doms = xs_.directory(root_);
  if (doms) {
    for (const auto& d : *doms) scan_domain_entry(d, std::nullopt);
  } else if (doms.error() != std::errc::no_such_file_or_directory) {
    // (ENOENT: no backend/vif yet; libxl creates it with the first vif.)
    log::write(log::Level::warn, kManagerLog,
               "cannot list " + root_ + ": " + doms.error().message() +
                   ": the vifs already there are served once something under them changes, "
                   "and their state records are kept");
  }
  initial_scan_done_ = true;
}

bool BackendManager::left_behind(const VifId& id) {
  if (vifs_.contains(id)) return false;
  if (!domain_exists_(id.domid)) return true;
  const auto online = xs_.read(root_ + "/" + std::to_string(id.domid.value()) + "/" +
                               std::to_string(id.devid.value()) + "/online");
  if (online) return *online != "1";
  return online.error() == std::errc::no_such_file_or_directory;
}

void BackendManager::scan_domain_entry(const std::string& dom_name,
                                       const std::optional<std::string>& dev_name) {
  const auto domid = hv::parse_domid(dom_name);
  if (!domid) {
    warn_junk("ignoring " + root_ + "/" + log::printable(dom_name) + ": not a domain id");
    return;
  }
  if (dev_name) {
    consider(dom_name, *domid, *dev_name);
    return;
  }
  auto devs = xs_.directory(root_ + "/" + dom_name);
  if (!devs) return;  // removed meanwhile
  for (const auto& v : *devs) consider(dom_name, *domid, v);
}

void BackendManager::consider(const std::string& dom_name, DomId domid,
                              const std::string& dev_name) {
  const auto devid = parse_devid(dev_name);
  if (!devid) {
    warn_junk("ignoring " + root_ + "/" + dom_name + "/" + log::printable(dev_name) +
              ": not a device id");
    return;
  }
  const VifId id{domid, *devid};
  if (auto it = vifs_.find(id); it != vifs_.end()) {
    // A vif that finished (its device was removed) may be re-created at once in the same
    // directory (detach + attach): let the old one go before judging the new one.
    if (!it->second.xenbus->finished()) return;
    vifs_.erase(it);
  }
  // A device directory is ours to serve while the toolstack keeps it online and it is not
  // closing: after a teardown our own state=6 write (and libxl's removal) must not bring a vif
  // back, while a daemon restarted under a live device still answers its removal.
  const std::string dir = root_ + "/" + dom_name + "/" + dev_name;
  const auto online = xs_.read(dir + "/online");
  const auto state_raw = xs_.read(dir + "/state");
  if (!online || *online != "1" || !state_raw) return;
  const auto state = xenbus::parse_xenbus_state(*state_raw);
  if (!state || !domain_exists_(domid)) return;
  // Found at start, online and past 1: an earlier daemon served it (a crash leaves 2 or 4,
  // an orderly exit 6). Adopt it, so the guest can reconnect.
  const bool adopt = !initial_scan_done_ && *state != xenbus::XenbusState::unknown &&
                     *state != xenbus::XenbusState::initialising;
  if (!adopt && (*state == xenbus::XenbusState::closing || *state == xenbus::XenbusState::closed))
    return;
  add_vif(id, adopt);
}

void BackendManager::add_vif(const VifId& id, bool adopt) {
  const vif::Tunables& t = tunables_.current();
  Vif vif;
  vif.handle = factory_.make_vif(id.domid, id.devid, t);
  if (!vif.handle) {
    log::write(log::Level::error, kManagerLog,
               "vif " + format_vif_id(id) + ": the vif layer refused it");
    return;
  }
  const xenbus::FeatureOptions features{t.max_queues, /*split_event_channels=*/true,
                                        /*ctrl_ring=*/true};
  vif.xenbus = std::make_unique<xenbus::BackendXenbus>(xs_, self_, id.domid, id.devid, *vif.handle,
                                                       features);
  if (auto ec = vif.xenbus->start()) {
    log::write(log::Level::error, kManagerLog,
               "vif " + format_vif_id(id) + ": cannot watch its directory: " + ec.message());
    return;
  }
  vif.xenbus->set_hotplug_runner([this, id] { run_hotplug(id); });
  log::write(log::Level::info, kManagerLog,
             (adopt ? "adopting vif " : "new vif ") + format_vif_id(id));
  auto& xenbus = *vifs_.emplace(id, std::move(vif)).first->second.xenbus;
  if (adopt) {
    if (auto ec = xenbus.adopt()) {
      log::write(log::Level::warn, kManagerLog,
                 "vif " + format_vif_id(id) + ": not adopted: " + ec.message());
    } else {
      // Rings mapped, ports bound and notified (or, without them, the reconnect begun).
      log_milestone(
          xenbus.view().rings == xenbus::RingsState::up ? "vif_adopted" : "vif_reconnecting",
          "vif=" + format_vif_id(id));
    }
  }
}

void BackendManager::run_hotplug(const VifId& id) {
  const std::string be = root_ + "/" + format_vif_id(id);
  const auto script = xs_.read(be + "/script");
  std::string why;
  if (!script || script->empty()) {
    why = "no script key";
  } else if (hotplug_ == nullptr) {
    why = "this daemon runs no hotplug scripts";
  } else if (auto ec =
                 hotplug_->launch(hotplug::resolve_script_path(*script), id.domid, id.devid)) {
    why = "cannot run " + *script + ": " + ec.message();
  } else {
    return;
  }
  report_hotplug_failure(id, why);
}

void BackendManager::report_hotplug_failure(const VifId& id, const std::string& why) {
  // As the script itself would on failure: the device then waits in Closed/InitWait, and the
  // operator sees why in xenstore and the log.
  const std::string be = root_ + "/" + format_vif_id(id);
  log::write(log::Level::error, kManagerLog, "vif " + format_vif_id(id) + ": hotplug: " + why);
  (void)xs_.write(be + "/hotplug-error", why);
  (void)xs_.write(be + "/hotplug-status", "error");
}

void BackendManager::reap_hotplug() {
  if (hotplug_ == nullptr) return;
  for (const auto& f : hotplug_->reap()) {
    const VifId id{f.domid, f.devid};
    const auto it = vifs_.find(id);
    // Gone or going: writing would re-create nodes the toolstack removed.
    if (it == vifs_.end() || it->second.xenbus->finished()) continue;
    const std::string be = root_ + "/" + format_vif_id(id);
    // A script that failed through its own `fatal` wrote its reason: keep it. One that timed
    // out (killed), died of a signal or exited without a word leaves the device in InitWait
    // with nothing to show: say why.
    if (const auto status = xs_.read(be + "/hotplug-status"); status && *status == "error")
      continue;
    report_hotplug_failure(id, f.reason);
  }
}

void BackendManager::on_release_domain() {
  for (auto& [id, vif] : vifs_) {
    if (vif.xenbus->finished() || domain_exists_(id.domid)) continue;
    log::write(log::Level::info, kManagerLog,
               "vif " + format_vif_id(id) + ": frontend domain is gone, tearing down");
    vif.xenbus->frontend_domain_gone();
  }
}

void BackendManager::check_vifs() {
  reap_hotplug();
  for (auto it = vifs_.begin(); it != vifs_.end();) {
    Vif& vif = it->second;
    if (!vif.xenbus->finished() && vif.xenbus->view().rings == xenbus::RingsState::up &&
        vif.handle->disabled()) {
      // Guest-triggered (a frontend that violates the protocol after every reconnect): limited.
      log::write_limited(
          guest_log_limit_, log::Level::warn, kManagerLog,
          "vif " + format_vif_id(it->first) + ": disabled by its data path, closing");
      vif.xenbus->fatal_from_datapath(EPROTO, "frontend violated the netif protocol");
    }
    if (vif.xenbus->finished()) {
      log::write(log::Level::info, kManagerLog, "vif " + format_vif_id(it->first) + " released");
      it = vifs_.erase(it);
    } else {
      ++it;
    }
  }
}

void BackendManager::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  backends_watch_.reset();
  release_watch_.reset();
  for (auto& [id, vif] : vifs_) vif.xenbus->shutdown();
  vifs_.clear();
}

void BackendManager::hand_over(const std::function<void(int)>& at_step) {
  if (shut_down_) return;
  shut_down_ = true;
  const auto step = [&](int n) {
    if (at_step) at_step(n);
  };
  step(1);
  backends_watch_.reset();
  release_watch_.reset();
  bool first = true;
  for (auto& [id, vif] : vifs_) {
    vif.handle->hand_over();
    if (std::exchange(first, false)) step(2);
  }
  if (first) step(2);
  step(3);
  // The machines and the vifs stay until the image ends; BackendXenbus's destructor writes
  // nothing, a handed-over vif's releases memory only.
}

std::vector<VifStatus> BackendManager::list() const {
  std::vector<VifStatus> out;
  out.reserve(vifs_.size());
  for (const auto& [id, vif] : vifs_) out.push_back({id, vif.xenbus->view(), vif.handle->report()});
  return out;
}

std::optional<VifStatus> BackendManager::status(const VifId& id) const {
  const auto it = vifs_.find(id);
  if (it == vifs_.end()) return std::nullopt;
  return VifStatus{id, it->second.xenbus->view(), it->second.handle->report()};
}

void BackendManager::warn_junk(const std::string& msg) {
  log::write_limited(junk_log_limit_, log::Level::warn, kManagerLog, msg);
}

}  // namespace unetback::daemon
