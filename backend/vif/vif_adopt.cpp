// A vif's state record and adoption: the record a connect writes (rings, ports, the TAP's
// ifindex, the keys in force), a successor's or a restarted daemon's adoption of a live vif
// from it without a reconnect, the handover at a planned takeover, and the release of what a
// guest that went while no daemon ran left behind.
#include <algorithm>
#include <cstdio>

#include "backend/vif/vif.hpp"
#include "common/util/log.hpp"

namespace unetback::vif {

void Vif::drop_record() {
  if (record_.valid()) mcast_->mirror_to(nullptr);
  record_.remove();
  // The keeper holds the TAP's queues on until the TAP goes (destroy_tap): the next connect
  // stores nothing again. A daemon started meanwhile finds no record for them and lets them
  // go (FdStore::release_unclaimed).
}

std::error_code Vif::start_record(std::uint32_t nr_queues) {
  if (state_dir_.empty()) return {};
  const auto keys = xenbus::encode_key_snapshot(connect_keys_, kRecordMaxKeysBytes);
  auto rec = VifRecord::create(VifRecord::path_for(state_dir_, frontend_, devid_), frontend_,
                               devid_, nr_queues, tap_->ifindex(), keys);
  if (!rec) return rec.error();
  record_ = std::move(*rec);
  // The TAP outlives a crash of the daemon, with its ifindex and bridge port; held open by the
  // keeper, with its queues and carrier too.
  if (!tap_->persistent()) {
    if (auto ec = tap_->set_persistent(true)) return ec;
  }
  keep_tap();
  return {};
}

bool Vif::adoptable(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be) {
  // The control ring's hash settings and a switch's port live only in the process: such a
  // vif reconnects.
  return !fe.ctrl && be.switch_name.empty();
}

std::optional<xenbus::KeySnapshot> Vif::handed_over_keys() {
  if (state_dir_.empty()) return std::nullopt;
  auto rec = VifRecord::open(VifRecord::path_for(state_dir_, frontend_, devid_), frontend_, devid_);
  // After a crash the keys are read again: the frontend may have written new ones since.
  if (!rec || rec->state() != RecordState::handed_over || rec->keys().empty()) return std::nullopt;
  return xenbus::decode_key_snapshot(rec->keys());
}

std::error_code Vif::adopt(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be,
                           const xenbus::Rate& rate) {
  if (state_dir_.empty() || !adoptable(fe, be))
    return std::make_error_code(std::errc::operation_not_supported);
  auto rec = VifRecord::open(VifRecord::path_for(state_dir_, frontend_, devid_), frontend_, devid_);
  if (!rec) return rec.error();
  const RecordHeader& h = rec->header();
  const RecordState state = rec->state();
  if (h.nr_queues != fe.queues.size() ||
      (state != RecordState::live && state != RecordState::handed_over))
    return std::make_error_code(std::errc::protocol_error);
  for (std::uint32_t i = 0; i < h.nr_queues; ++i) {
    const QueueRecord& q = rec->queue(i);
    const xenbus::QueueConfig& f = fe.queues[i];
    // The frontend's rings and ports must be those the record is about.
    if (q.tx_ref != f.tx_ring_ref.value() || q.rx_ref != f.rx_ring_ref.value() ||
        q.tx_evtchn != f.evtchn_tx.value() || q.rx_evtchn != f.evtchn_rx.value())
      return std::make_error_code(std::errc::protocol_error);
  }
  if (!tap_) {
    // A record names its TAP by ifindex, which the kernel reuses: the interface there now must
    // still be this vif's (another program's device is never taken, nor removed later).
    if (!is_vifs_tap(h.ifindex, be.backend_path)) {
      log::write(log::Level::warn, prefix_,
                 "the state record's TAP (ifindex " + std::to_string(h.ifindex) +
                     ") is not this vif's any more");
      return std::make_error_code(std::errc::no_such_device);
    }
    net::TapConfig cfg;
    cfg.vnet_hdr = true;
    cfg.multi_queue = true;
    cfg.queues = std::max<std::uint32_t>(1, tunables_.max_queues);
    cfg.non_blocking = true;
    // The queues the keeper held while no daemon ran, if it did: taken as they are.
    std::vector<UniqueFd> kept;
    if (tap_keeper_ != nullptr) kept = tap_keeper_->take(h.ifindex);
    const std::size_t offered = kept.size();
    auto tap = net::TapDevice::attach(h.ifindex, cfg, std::move(kept));
    if (!tap) return tap.error();
    if (tap->from_kept_fds()) {
      log::write(log::Level::info, prefix_,
                 "TAP queues kept open by the service manager: " + std::to_string(offered) +
                     " (carrier never went off)");
    } else if (offered != 0) {
      log::write(log::Level::warn, prefix_,
                 std::to_string(offered) +
                     " kept TAP queue fds do not match the TAP: attached with new ones");
    }
    // Host traffic only to the queues that will be read (connect attaches them); a TAP an
    // older daemon made gets the queue length in force.
    if (auto ec = tap->set_active_queues(1)) return ec;
    if (auto ec = tap->set_tx_queue_len(tunables_.tap_queue_len)) return ec;
    tap_.emplace(std::move(*tap));
  }
  record_ = std::move(*rec);
  adopting_ = true;
  const std::error_code ec = connect(fe, be, rate);
  adopting_ = false;
  if (ec) {
    // The rings may be half settled: the reconnect that follows starts them over.
    drop_record();
    return ec;
  }
  record_.set_state(RecordState::live);
  keep_tap();
  adopted_ = state == RecordState::handed_over ? "taken_over" : "recovered";
  log::write(log::Level::info, prefix_,
             std::string(state == RecordState::handed_over ? "taken over" : "recovered") +
                 " on TAP " + tap_->name() + " (ifindex " + std::to_string(tap_->ifindex()) + ")");
  return {};
}

void Vif::hand_over() {
  left_to_kernel_ = halt_queues();
  if (record_.valid()) record_.set_state(RecordState::handed_over);
  // What the keeper holds is the successor's now: never forgotten from here.
  kept_ifindex_ = 0;
  if (tap_ && tap_->persistent()) tap_->keep_for_successor();
  handed_over_ = true;
}

void Vif::keys_applied(const xenbus::KeySnapshot& keys) {
  for (const auto& key : keys) {
    auto it = std::find_if(connect_keys_.begin(), connect_keys_.end(),
                           [&](const auto& kv) { return kv.first == key.first; });
    if (it != connect_keys_.end()) {
      it->second = key.second;
    } else {
      connect_keys_.push_back(key);
    }
  }
  if (!record_.valid()) return;
  // A successor taking the vif over connects from these keys: they say what is in force.
  if (!record_.set_keys(xenbus::encode_key_snapshot(connect_keys_, kRecordMaxKeysBytes))) {
    log::write(log::Level::debug, prefix_,
               "the changed keys do not fit the state record: a successor reads xenstore");
  }
}

std::size_t release_left_behind(const std::filesystem::path& state_dir,
                                const std::string& backend_root,
                                const std::function<bool(DomId, DevId)>& in_use) {
  std::size_t released = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state_dir, ec)) {
    unsigned dom = 0, dev = 0;
    char tail = 0;
    const std::string name = e.path().filename().string();
    // (A device id is 32 bits, as the toolstack's; a domain id 16.)
    if (std::sscanf(name.c_str(), "vif-%u-%u.stat%c", &dom, &dev, &tail) != 3 || tail != 'e' ||
        dom > 0xffff)
      continue;
    const DomId d{static_cast<std::uint16_t>(dom)};
    const DevId v{dev};
    if (in_use(d, v)) continue;
    const std::string backend_path =
        backend_root + "/" + std::to_string(dom) + "/" + std::to_string(dev);
    auto rec = VifRecord::open(e.path(), d, v);
    // A live process still serves it: not left behind.
    if (!rec && rec.error() == std::errc::device_or_resource_busy) continue;
    if (rec && is_vifs_tap(rec->header().ifindex, backend_path)) {
      net::TapConfig cfg;
      cfg.vnet_hdr = true;
      cfg.multi_queue = true;
      // Attached and dropped without keeping it: TUNSETPERSIST 0, and the TAP is gone.
      if (auto tap = net::TapDevice::attach(rec->header().ifindex, cfg))
        log::write(log::Level::info, "unetbackd", "removed the left-behind TAP " + tap->name());
    }
    std::filesystem::remove(e.path(), ec);
    ++released;
  }
  return released;
}

}  // namespace unetback::vif
