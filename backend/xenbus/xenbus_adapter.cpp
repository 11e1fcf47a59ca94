#include "backend/xenbus/xenbus_adapter.hpp"

#include <cerrno>
#include <deque>
#include <type_traits>

#include "common/util/milestone.hpp"

namespace unetback::xenbus {
namespace {

constexpr std::string_view kState = "state";
constexpr std::string_view kOnline = "online";
constexpr std::string_view kHotplug = "hotplug";
constexpr std::string_view kFrontendState = "fe-state";
constexpr std::string_view kRate = "rate";
constexpr std::string_view kMulticast = "fe-mcast";
constexpr std::string_view kMacSpoofing = "mac-spoofing";

// An event's follow-ups (a connect result after ReadFrontendAndConnect, a failure after
// CreateTap) are bounded by the machine; this only stops a bug from looping forever.
constexpr int kMaxChainedEvents = 32;

}  // namespace

BackendXenbus::BackendXenbus(hv::XenStore& xs, DomId self, DomId frontend, DevId devid,
                             VifControl& vif, FeatureOptions features)
    : xs_(xs),
      vif_(vif),
      self_(self),
      frontend_(frontend),
      devid_(devid),
      features_(features),
      backend_path_(backend_dir_path(self, frontend, devid)),
      token_prefix_(token_prefix(frontend, devid)),
      log_prefix_("vif" + std::to_string(frontend.value()) + "." + std::to_string(devid.value())) {}

std::string BackendXenbus::token_prefix(DomId frontend, DevId devid) {
  return "unetback/vif/" + std::to_string(frontend.value()) + "/" + std::to_string(devid.value()) +
         "/";
}

std::error_code BackendXenbus::start() {
  if (auto ec = add_watch(state_watch_, backend_path_ + "/state", kState)) return ec;
  if (auto ec = add_watch(online_watch_, backend_path_ + "/online", kOnline)) return ec;
  return add_watch(hotplug_watch_, backend_path_ + "/hotplug-status", kHotplug);
}

bool BackendXenbus::owns(const hv::XsWatchEvent& ev) const {
  return ev.token.compare(0, token_prefix_.size(), token_prefix_) == 0;
}

void BackendXenbus::handle_watch(const hv::XsWatchEvent& ev) {
  if (!owns(ev) || view_.shut_down) return;
  const std::string_view kind = std::string_view(ev.token).substr(token_prefix_.size());
  if (kind == kState) return on_backend_state();
  if (kind == kOnline) return on_online();
  if (kind == kHotplug) return on_hotplug_status();
  if (kind == kFrontendState) return on_frontend_state();
  if (kind == kRate) return on_rate();
  if (kind == kMulticast) return on_multicast_control();
  if (kind == kMacSpoofing) return on_mac_spoofing();
}

void BackendXenbus::frontend_domain_gone() {
  dispatch(FrontendDomainGone{});
}

void BackendXenbus::shutdown() {
  dispatch(DaemonShutdown{});
}

void BackendXenbus::fatal_from_datapath(int error, const std::string& message) {
  if (view_.shut_down || view_.rings != RingsState::up) return;
  // The machine knows one way to "fatal with the rings gone": a failed connect (ReportFatal,
  // then Closing). Release the rings here first, then tell it the connection did not hold:
  // the outcome is the machine's own fatal path, without a second kind of event.
  drop_connection_watches();
  vif_.disconnect();
  view_.rings = RingsState::connecting;
  dispatch(ConnectFailed{error, "data path: " + message});
}

// ---- watch handlers: read the node, turn it into an Event ------------------------------------

void BackendXenbus::on_backend_state() {
  const auto raw = read(backend_path_ + "/state");
  if (!raw) return;  // the directory is being removed after we closed; nothing to do
  const auto s = parse_xenbus_state(*raw);
  if (!s) {
    log::write(log::Level::warn, log_prefix_, "toolstack wrote an invalid backend state; ignored");
    return;
  }
  // Our own writes come back as watch events too: a value equal to what we last wrote is
  // that echo. (A later write of ours may already have replaced the one that fired.)
  if (*s == view_.backend) return;
  if (*s == XenbusState::initialising) return try_probe();
  const auto online = read(backend_path_ + "/online");
  dispatch(ToolstackSetBackendState{*s, online && *online == "1"});
}

void BackendXenbus::on_online() {
  const auto raw = read(backend_path_ + "/online");
  bool online = false;
  if (!raw) {
    // No online node: the directory is gone (or going). Only meaningful once probed.
    if (view_.backend == XenbusState::unknown) return;
  } else if (*raw == "1") {
    online = true;
  } else if (*raw != "0") {
    log::write(log::Level::warn, log_prefix_, "toolstack wrote an invalid online value; ignored");
    return;
  }
  if (online) try_probe();
  if (!online && view_.backend != XenbusState::unknown) {
    // libxl writes online=0 and state=5 in one transaction: if its state is already there,
    // report both together so the teardown neither rewrites 5 nor writes 6 before the TAP
    // is gone (whichever of the two watches fires first).
    const auto raw_state = read(backend_path_ + "/state");
    const auto s = raw_state ? parse_xenbus_state(*raw_state) : std::nullopt;
    if (s && (*s == XenbusState::closing || *s == XenbusState::closed) && *s != view_.backend) {
      dispatch(ToolstackSetBackendState{*s, false});
      return;
    }
  }
  dispatch(OnlineChanged{online});
}

void BackendXenbus::on_hotplug_status() {
  const auto raw = read(backend_path_ + "/hotplug-status");
  HotplugStatus status = HotplugStatus::other;  // "" (libxl's "wait for me") or missing
  if (raw && *raw == "connected") status = HotplugStatus::connected;
  if (raw && *raw == "error") {
    status = HotplugStatus::error;
    const auto why = read(backend_path_ + "/hotplug-error");
    log::write(log::Level::error, log_prefix_,
               "hotplug script failed: " + why.value_or("(no hotplug-error)"));
  }
  dispatch(HotplugStatusChanged{status});
}

void BackendXenbus::on_frontend_state() {
  if (!config_) return;
  const auto raw = read(config_->frontend_path + "/state");
  if (!raw) {
    // As Linux's xenbus_read_driver_state: a missing state node reads as Unknown.
    dispatch(FrontendStateChanged{XenbusState::unknown});
    return;
  }
  const auto s = parse_xenbus_state(*raw);
  if (!s) {
    // Hostile or broken: not a value any xenbus driver writes. Linux's frontend_changed()
    // answers an unexpected state with xenbus_dev_fatal (error node + Closing); so do we.
    warn_guest("frontend wrote an invalid state");
    dispatch(FrontendStateInvalid{});
    return;
  }
  dispatch(FrontendStateChanged{*s});
}

void BackendXenbus::on_rate() {
  if (view_.rings != RingsState::up) return;
  KeySnapshot keys;
  auto r = read_rate(snapshot_reader(backend_path_, &keys, /*replay=*/false));
  Rate rate;
  if (r) {
    rate = *r;
  } else {
    // Linux xen_net_read_rate: a rate it cannot parse means unlimited, with a warning.
    log::write(log::Level::warn, log_prefix_, "rate: " + r.error().reason + "; traffic unlimited");
  }
  if (last_rate_ == rate) return;
  last_rate_ = rate;
  vif_.rate_changed(rate);
  vif_.keys_applied(keys);
  log::write(log::Level::info, log_prefix_,
             rate.unlimited() ? std::string("rate: unlimited, in force")
                              : "rate: " + std::to_string(rate.bytes) + " bytes every " +
                                    std::to_string(rate.usecs) + " us, in force");
}

void BackendXenbus::on_mac_spoofing() {
  if (view_.rings != RingsState::up || !last_allow_mac_spoofing_) return;
  KeySnapshot keys;
  auto v = read_bool_key(snapshot_reader(backend_path_, &keys, /*replay=*/false),
                         kAllowMacSpoofingKey, false);
  if (!v) {
    // The toolstack's key (docs/operator-guide.md): a bad value is refused and the previous one
    // kept.
    log::write(log::Level::warn, log_prefix_,
               std::string(kAllowMacSpoofingKey) + ": " + v.error().reason + "; keeping " +
                   (*last_allow_mac_spoofing_ ? "1" : "0"));
    return;
  }
  if (*last_allow_mac_spoofing_ == *v) return;
  last_allow_mac_spoofing_ = *v;
  log::write(log::Level::info, log_prefix_,
             *v ? "guest TX may carry any source MAC" : "guest TX must carry the vif's own MAC");
  vif_.mac_spoofing_changed(*v);
  vif_.keys_applied(keys);
}

void BackendXenbus::on_multicast_control() {
  if (view_.rings != RingsState::up || !config_) return;
  KeySnapshot keys;
  auto v = read_bool_key(snapshot_reader(config_->frontend_path, &keys, /*replay=*/false),
                         "request-multicast-control", false);
  bool enabled = false;
  if (v) {
    enabled = *v;
  } else {
    warn_guest("request-multicast-control: " + v.error().reason + "; filter off");
  }
  if (last_multicast_control_ == enabled) return;
  last_multicast_control_ = enabled;
  vif_.multicast_control_changed(enabled);
  vif_.keys_applied(keys);
}

// The toolstack has created (or re-created) the directory with state=1: validate its keys and
// watch the frontend it names, then let the machine probe.
void BackendXenbus::try_probe() {
  const bool may_probe = view_.backend == XenbusState::unknown ||
                         (view_.removed && view_.backend == XenbusState::closed);
  if (!may_probe) return;
  const auto state = read(backend_path_ + "/state");
  const auto online = read(backend_path_ + "/online");
  if (!state || *state != "1" || !online || *online != "1") return;

  if (prepare_probe()) dispatch(BackendDirAppeared{});
}

bool BackendXenbus::prepare_probe() {
  probe_keys_.clear();
  auto cfg = parse_backend_config(snapshot_reader(backend_path_, &probe_keys_), frontend_, devid_);
  if (!cfg) {
    const KeyError& e = cfg.error();
    log::write(log::Level::error, log_prefix_,
               "refusing the backend directory: " + e.key + " " + e.reason);
    dispatch(ProbeFailed{e.error, "reading " + backend_path_ + "/" + e.key + ": " + e.reason});
    return false;
  }
  config_ = *cfg;
  config_->backend_path = backend_path_;
  frontend_watch_.reset();
  if (auto ec = add_watch(frontend_watch_, config_->frontend_path + "/state", kFrontendState)) {
    dispatch(ProbeFailed{ec.value(), "watching " + config_->frontend_path + "/state"});
    return false;
  }
  return true;
}

std::error_code BackendXenbus::adopt() {
  if (view_.backend != XenbusState::unknown)
    return std::make_error_code(std::errc::already_connected);
  const auto state = read(backend_path_ + "/state");
  const auto online = read(backend_path_ + "/online");
  const auto found = state ? parse_xenbus_state(*state) : std::nullopt;
  if (!found || !online || *online != "1" || *found == XenbusState::unknown ||
      *found == XenbusState::initialising)
    return std::make_error_code(std::errc::invalid_argument);
  // A planned takeover left the keys the device connected with: read from them, the gap
  // has no xenstore round trip per key (the watches set up below re-read what may change).
  if (*found == XenbusState::connected) replay_ = vif_.handed_over_keys();
  const bool probed = prepare_probe();
  const bool rings = probed && *found == XenbusState::connected && adopt_rings();
  replay_.reset();
  if (!probed) return std::make_error_code(std::errc::invalid_argument);
  if (rings) {
    log::write(log::Level::info, log_prefix_, "adopted the running device: rings, ports and TAP");
    dispatch(RingsAdopted{});
    return {};
  }
  vif_.adoption_refused();
  log::write(log::Level::info, log_prefix_,
             "adopting the device (found in state " + std::string(state_name(*found)) + ")");
  dispatch(BackendAdopted{*found});
  return {};
}

bool BackendXenbus::adopt_rings() {
  const auto fstate_raw = read(config_->frontend_path + "/state");
  const auto fstate = fstate_raw ? parse_xenbus_state(*fstate_raw) : std::nullopt;
  if (fstate != XenbusState::connected) return false;
  const FrontendLimits limits{features_.max_queues, features_.ctrl_ring};
  KeySnapshot keys = probe_keys_;
  auto fe = parse_frontend_config(snapshot_reader(config_->frontend_path, &keys), limits);
  if (!fe) return false;
  Rate rate;
  if (auto r = read_rate(snapshot_reader(backend_path_, &keys))) rate = *r;
  vif_.remember_keys(keys);
  // Where an adoption's time goes (the lab splits a restart's gap by these): the xenstore
  // reads above, the vif's take-over (record, rings, ports, TAP), the watches below.
  const std::string which =
      "vif=" + std::to_string(frontend_.value()) + "/" + std::to_string(devid_.value());
  log_milestone("vif_config_read", which);
  if (auto ec = vif_.adopt(*fe, *config_, rate)) {
    log::write(log::Level::info, log_prefix_,
               "cannot take the rings over (" + ec.message() + "): the frontend reconnects");
    return false;
  }
  log_milestone("vif_rings_taken", which);
  watch_connection(*fe, rate);
  return true;
}

// ---- running the machine ----------------------------------------------------------------------

void BackendXenbus::dispatch(Event first) {
  std::deque<Event> pending{std::move(first)};
  for (int n = 0; !pending.empty() && n < kMaxChainedEvents; ++n) {
    const Event event = std::move(pending.front());
    pending.pop_front();
    Transition t = next(view_, event);
    log::write(log::Level::debug, log_prefix_, describe(event) + " -> " + describe(t.view));
    view_ = t.view;
    for (const Action& a : t.actions) {
      // A result fed back ends the list: after a failed CreateTap the following WriteState
      // must not happen, and ReadFrontendAndConnect is always last.
      if (auto feedback = execute(a)) {
        pending.push_back(std::move(*feedback));
        break;
      }
    }
  }
  if (view_.removed || view_.shut_down) {
    drop_connection_watches();
    frontend_watch_.reset();
  }
}

std::optional<Event> BackendXenbus::execute(const Action& action) {
  return std::visit(
      [&](const auto& a) -> std::optional<Event> {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, CreateTap>) {
          if (auto ec = vif_.create_tap(*config_)) {
            return TapCreateFailed{ec.value(),
                                   "creating " + config_->tap_name + ": " + ec.message()};
          }
        } else if constexpr (std::is_same_v<T, AdvertiseFeatures>) {
          if (auto ec = write_features(xs_, backend_path_, features_))
            return ProbeFailed{ec.value(), "writing feature keys: " + ec.message()};
        } else if constexpr (std::is_same_v<T, WriteState>) {
          if (auto ec = xs_.write(backend_path_ + "/state", to_xs_string(a.state))) {
            log::write(log::Level::error, log_prefix_,
                       "writing state " + std::string(state_name(a.state)) + ": " + ec.message());
          } else {
            // A frontend can make us cycle through the states as fast as it writes its own.
            log_guest(log::Level::info, "backend state -> " + std::string(state_name(a.state)));
          }
        } else if constexpr (std::is_same_v<T, ReadFrontendAndConnect>) {
          return read_frontend_and_connect();
        } else if constexpr (std::is_same_v<T, Disconnect>) {
          drop_connection_watches();
          vif_.disconnect();
        } else if constexpr (std::is_same_v<T, DestroyTap>) {
          vif_.destroy_tap();
        } else if constexpr (std::is_same_v<T, RemoveHotplugStatus>) {
          auto ec = xs_.rm(backend_path_ + "/hotplug-status");
          if (ec && ec != std::errc::no_such_file_or_directory)
            log::write(log::Level::warn, log_prefix_, "removing hotplug-status: " + ec.message());
        } else if constexpr (std::is_same_v<T, RunHotplugScript>) {
          if (hotplug_runner_) {
            hotplug_runner_();
          } else {
            log::write(log::Level::warn, log_prefix_,
                       "no hotplug runner: waiting for someone to run the hotplug script");
          }
        } else if constexpr (std::is_same_v<T, ApplyXdpHeadroom>) {
          return apply_xdp_headroom();
        } else if constexpr (std::is_same_v<T, ReportFatal>) {
          // xenbus_dev_fatal's format: "<errno> <message>" under error/<nodename>/error.
          warn_guest("fatal: " + a.message);
          const std::string value = std::to_string(a.error) + " " + a.message;
          if (auto ec = xs_.write(error_node_path(self_, frontend_, devid_), value))
            log::write(log::Level::error, log_prefix_, "writing the error node: " + ec.message());
        }
        return std::nullopt;
      },
      action);
}

std::optional<Event> BackendXenbus::read_frontend_and_connect() {
  const FrontendLimits limits{features_.max_queues, features_.ctrl_ring};
  KeySnapshot keys = probe_keys_;
  auto fe = parse_frontend_config(snapshot_reader(config_->frontend_path, &keys), limits);
  if (!fe) {
    const KeyError& e = fe.error();
    return ConnectFailed{e.error,
                         "reading " + config_->frontend_path + "/" + e.key + ": " + e.reason};
  }
  Rate rate;
  if (auto r = read_rate(snapshot_reader(backend_path_, &keys))) {
    rate = *r;
  } else {
    log::write(log::Level::warn, log_prefix_, "rate: " + r.error().reason + "; traffic unlimited");
  }
  vif_.remember_keys(keys);
  if (auto ec = vif_.connect(*fe, *config_, rate)) {
    return ConnectFailed{ec.value(), "connecting " + std::to_string(fe->queues.size()) +
                                         " queue(s): " + ec.message()};
  }
  log_guest(log::Level::info, "connected " + std::to_string(fe->queues.size()) + " queue(s)");
  watch_connection(*fe, rate);
  return ConnectSucceeded{};
}

void BackendXenbus::watch_connection(const FrontendConfig& fe, const Rate& rate) {
  // Both watches fire at once; the remembered values make that first event a no-op.
  last_rate_ = rate;
  last_multicast_control_ = fe.multicast_control;
  last_allow_mac_spoofing_ = config_->allow_mac_spoofing;
  last_xdp_headroom_ = fe.xdp_headroom;
  if (add_watch(rate_watch_, backend_path_ + "/rate", kRate) ||
      add_watch(multicast_watch_, config_->frontend_path + "/request-multicast-control",
                kMulticast) ||
      add_watch(mac_spoofing_watch_, backend_path_ + "/" + std::string(kAllowMacSpoofingKey),
                kMacSpoofing)) {
    log::write(log::Level::warn, log_prefix_,
               "cannot watch rate/request-multicast-control/" + std::string(kAllowMacSpoofingKey));
  }
}

std::optional<Event> BackendXenbus::apply_xdp_headroom() {
  KeySnapshot keys;
  auto h = read_xdp_headroom(snapshot_reader(config_->frontend_path, &keys, /*replay=*/false));
  if (!h) {
    const KeyError& e = h.error();
    return ReconfigureFailed{e.error,
                             "reading " + config_->frontend_path + "/" + e.key + ": " + e.reason};
  }
  // Read on 7 and again on the way back to 4: the second read is usually no news.
  if (last_xdp_headroom_ == *h) return std::nullopt;
  last_xdp_headroom_ = *h;
  vif_.xdp_headroom_changed(*h);
  vif_.keys_applied(keys);
  log_guest(log::Level::info, "guest RX with " + std::to_string(*h) + " bytes of XDP headroom");
  return std::nullopt;
}

void BackendXenbus::drop_connection_watches() {
  rate_watch_.reset();
  multicast_watch_.reset();
  mac_spoofing_watch_.reset();
  last_rate_.reset();
  last_multicast_control_.reset();
  last_allow_mac_spoofing_.reset();
  last_xdp_headroom_.reset();
}

// ---- helpers ------------------------------------------------------------------------------------

std::optional<std::string> BackendXenbus::read(const std::string& path) {
  auto r = xs_.read(path);
  if (!r) return std::nullopt;
  return std::move(*r);
}

KeyReader BackendXenbus::reader_for(std::string dir) {
  return [this, dir = std::move(dir)](std::string_view key) -> std::optional<std::string> {
    return read(dir + "/" + std::string(key));
  };
}

KeyReader BackendXenbus::snapshot_reader(std::string dir, KeySnapshot* into, bool replay) {
  return [this, dir = std::move(dir), into,
          replay](std::string_view key) -> std::optional<std::string> {
    std::string path = dir + "/" + std::string(key);
    std::optional<std::string> value;
    if (auto replayed = replay && replay_ ? snapshot_lookup(*replay_, path) : std::nullopt) {
      value = std::move(*replayed);
    } else {
      value = read(path);
    }
    into->emplace_back(std::move(path), value);
    return value;
  };
}

std::error_code BackendXenbus::add_watch(hv::XsWatch& slot, const std::string& path,
                                         std::string_view kind) {
  auto w = hv::XsWatch::add(xs_, path, token_prefix_ + std::string(kind));
  if (!w) return w.error();
  slot = std::move(*w);
  return {};
}

void BackendXenbus::warn_guest(const std::string& msg) {
  log_guest(log::Level::warn, msg);
}

void BackendXenbus::log_guest(log::Level level, const std::string& msg) {
  log::write_limited(guest_log_limit_, level, log_prefix_, msg);
}

}  // namespace unetback::xenbus
