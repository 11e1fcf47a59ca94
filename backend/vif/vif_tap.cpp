// A vif's TAP: made for the vif (or, after a restart, the one an earlier daemon left for it,
// found by its ifalias), set up for the host side, and kept open in the service manager's fd
// store while the vif's state record lives, so the TAP and its carrier outlive a daemon.
#include <algorithm>
#include <net/if.h>

#include "backend/vif/vif.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {
std::string tap_alias(const std::string& backend_path) {
  return "unetbackd " + backend_path;
}

bool is_vifs_tap(int ifindex, const std::string& backend_path) {
  const auto alias = net::interface_alias(ifindex);
  return alias && *alias == tap_alias(backend_path);
}

namespace {

/// netback's dummy vif MAC (xenvif_alloc: "FE:FF:FF:FF:FF:FF").
constexpr net::MacAddress kVifMac{{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff}};

/// The persistent TAP an earlier daemon left under `cfg.name` for this very vif (its ifalias
/// says so), attached again: a vif that reconnects after a restart keeps its bridge port.
Result<net::TapDevice> attach_left_tap(const net::TapConfig& cfg, const std::string& backend_path) {
  const unsigned idx = ::if_nametoindex(cfg.name.c_str());
  if (idx == 0 || !is_vifs_tap(static_cast<int>(idx), backend_path))
    return make_error_code(net::TapError::name_in_use);
  return net::TapDevice::attach(static_cast<int>(idx), cfg);
}

}  // namespace

std::error_code Vif::create_tap(const xenbus::BackendConfig& be) {
  if (tap_) return {};
  net::TapConfig cfg;
  cfg.name = be.tap_name;
  cfg.vnet_hdr = true;
  cfg.multi_queue = true;
  // Every queue a frontend may ask for, now: the hotplug script may rename the TAP before the
  // frontend connects, and a queue cannot be attached by name after that.
  cfg.queues = std::max<std::uint32_t>(1, tunables_.max_queues);
  cfg.non_blocking = true;
  // Until a frontend says what it takes, the host hands us plain frames.
  cfg.offloads = {};
  if (be.mtu) cfg.mtu = *be.mtu;
  // Linux netback gives every vif the dummy MAC FE:FF:FF:FF:FF:FF (the guest's own MAC is in
  // B:mac, for bookkeeping): a Linux bridge takes the lowest port MAC as its own, so a vif
  // must never win, or the bridge's MAC would change whenever a vif comes or goes (a
  // restarted backend would leave every guest's ARP entry for the bridge pointing nowhere).
  cfg.mac = kVifMac;
  auto tap = net::TapDevice::create(cfg);
  if (!tap && tap.error() == net::TapError::name_in_use && !state_dir_.empty())
    tap = attach_left_tap(cfg, be.backend_path);
  if (!tap) {
    log::write(log::Level::error, prefix_,
               "cannot create TAP " + be.tap_name + ": " + tap.error().message());
    return tap.error();
  }
  // Until a frontend connects only queue 0 is attached (the kernel would queue host traffic
  // for nobody on the others). The ifalias marks the TAP as this vif's: vif-unetback checks it
  // before any offline action, so it never takes down a device someone else made.
  // Its queue length bounds what the host piles up in dom0 for a guest that stops reading.
  std::error_code ec = tap->set_active_queues(1);
  if (!ec) ec = tap->set_alias(tap_alias(be.backend_path));
  if (!ec) ec = tap->set_tx_queue_len(tunables_.tap_queue_len);
  if (ec) {
    log::write(
        log::Level::error, prefix_,
        "cannot set up TAP " + be.tap_name + " (queues, ifalias, txqueuelen): " + ec.message());
    return ec;
  }
  tap_.emplace(std::move(*tap));
  log::write(log::Level::info, prefix_,
             "created TAP " + tap_->name() + " (ifindex " + std::to_string(tap_->ifindex()) + ", " +
                 std::to_string(tap_->queue_count()) + " queues)");
  return {};
}

void Vif::destroy_tap() {
  if (!tap_) return;
  log::write(log::Level::info, prefix_, "removing TAP " + tap_->name());
  forget_tap();
  tap_.reset();
}

void Vif::keep_tap() {
  if (tap_keeper_ == nullptr || !tap_) return;
  // A TAP's queue fds are the same for its whole life: once kept, a reconnect of the guest
  // has nothing new to tell the keeper. (systemd compares every fd it is sent with each one
  // its store holds: a guest reconnecting in a loop would cost PID 1 time for every vif.)
  if (kept_ifindex_ == tap_->ifindex()) return;
  const std::vector<int> fds = tap_->queue_fds();
  tap_keeper_->keep(tap_->ifindex(), fds);
  kept_ifindex_ = tap_->ifindex();
}

void Vif::forget_tap() {
  if (tap_keeper_ == nullptr || kept_ifindex_ == 0) return;
  tap_keeper_->forget(std::exchange(kept_ifindex_, 0));
}

}  // namespace unetback::vif
