// A vif: one guest's network device. Its connect (the rings mapped, a queue and a thread of
// the pool for each, the control ring), its disconnect, the watched values it applies while
// connected, and its report. Its TAP is in vif_tap.cpp, its state record and adoption in
// vif_adopt.cpp.
#include "backend/vif/vif.hpp"

#include <new>

#include "common/util/log.hpp"

namespace unetback::vif {
namespace {

std::string vif_prefix(DomId fe, DevId dev) {
  return "vif" + std::to_string(fe.value()) + "." + std::to_string(dev.value());
}

/// Descriptors a connect may take at most, per queue: its grant-table and event-channel
/// handles, two bound ports (an eventfd each on xensim), the TAP queue, the io_urings of its
/// TAP reads and writes and of posted reads; and once per connect the frontend's memory
/// (xensim), the state record (held open for its lock) and slack. (The loop watches these fds
/// themselves: no duplicates since EventLoop.)
constexpr std::size_t kFdsPerQueue = 8;
constexpr std::size_t kFdsPerConnect = 4;
/// A control ring: its grant-table and event-channel handles, the port, and one spare.
constexpr std::size_t kFdsPerCtrlRing = 4;

/// The errno of what a connect threw (the error node shows it), and its text for the log.
std::error_code error_of_current_exception(std::string& what) {
  try {
    throw;
  } catch (const SetupError& e) {
    what = e.what();
    return e.code() ? e.code() : std::make_error_code(std::errc::io_error);
  } catch (const std::bad_alloc&) {
    what = "out of memory";
    return std::make_error_code(std::errc::not_enough_memory);
  } catch (const std::system_error& e) {
    what = e.what();
    return e.code();
  } catch (const std::exception& e) {
    what = e.what();
    return std::make_error_code(std::errc::io_error);
  }
}

}  // namespace

Vif::Vif(hv::Hypervisor& hv, event::EventLoopPool& loops, DomId frontend, DevId devid,
         Tunables tunables, std::function<void()> on_disabled, SwitchRegistry* switches,
         const FdReserve* fd_reserve, std::filesystem::path state_dir, TapKeeper* tap_keeper)
    : hv_(hv),
      loops_(loops),
      frontend_(frontend),
      devid_(devid),
      tunables_(tunables),
      on_disabled_(std::move(on_disabled)),
      switches_(switches),
      fd_reserve_(fd_reserve),
      state_dir_(std::move(state_dir)),
      tap_keeper_(tap_keeper),
      prefix_(vif_prefix(frontend, devid)) {}

Vif::~Vif() {
  // Handed over: closing would drop the record and the TAP the successor adopts.
  if (handed_over_) return;
  disconnect();
  destroy_tap();
}

std::error_code Vif::map_rings(const xenbus::QueueConfig& q, std::uint32_t index,
                               QueueResources& res) {
  // The ring pages: we write responses into them, so read-write.
  const GrantRef tx_ref[] = {q.tx_ring_ref};
  const GrantRef rx_ref[] = {q.rx_ring_ref};
  auto tx_page = res.table->map(frontend_, tx_ref, hv::Access::read_write);
  if (!tx_page) return tx_page.error();
  res.tx_page = std::move(*tx_page);
  auto rx_page = res.table->map(frontend_, rx_ref, hv::Access::read_write);
  if (!rx_page) return rx_page.error();
  res.rx_page = std::move(*rx_page);
  QueueRecord* rec = record_.valid() ? &record_.queue(index) : nullptr;
  if (adopting_) {
    // What the dead daemon left in flight is settled before anything reads the rings: the
    // record, never a slot that a response may have overwritten, says what was consumed.
    auto tx = recover_tx_ring(res.tx_page.data(), rec->tx);
    if (!tx) return tx.error();
    auto rx = recover_rx_ring(res.rx_page.data(), rec->rx);
    if (!rx) return rx.error();
    log::write(log::Level::info, prefix_ + "-q" + std::to_string(index),
               "rings recovered: tx " + std::to_string(tx->pushed) + " pushed, " +
                   std::to_string(tx->answered) + " answered; rx " + std::to_string(rx->pushed) +
                   " pushed, " + std::to_string(rx->answered) + " returned");
  }
  // netback refuses rings whose frontend claims more requests than fit (-EIO).
  auto tx_ring = ring::TxBackRing::attach(res.tx_page.data());
  if (!tx_ring) return tx_ring.error();
  res.tx_ring = *tx_ring;
  auto rx_ring = ring::RxBackRing::attach(res.rx_page.data());
  if (!rx_ring) return rx_ring.error();
  res.rx_ring = *rx_ring;
  if (rec != nullptr) {
    rec->tx_ref = q.tx_ring_ref.value();
    rec->rx_ref = q.rx_ring_ref.value();
    rec->tx_evtchn = q.evtchn_tx.value();
    rec->rx_evtchn = q.evtchn_rx.value();
    reset_ring_record(rec->tx, res.tx_ring->req_cons());
    reset_ring_record(rec->rx, res.rx_ring->req_cons());
    res.tx.recorder = TxRecorder(&rec->tx);
    res.rx.recorder = RxRecorder(&rec->rx);
  }
  return {};
}

Result<std::unique_ptr<VifQueue>> Vif::make_queue(const xenbus::FrontendConfig& fe,
                                                  std::uint32_t index, const xenbus::Rate& rate,
                                                  std::optional<SwitchAttachment> sw) {
  const xenbus::QueueConfig& q = fe.queues[index];
  QueueResources res;
  res.id = QueueId{index};
  // Opening the handles may throw (SetupError with the errno: EMFILE, ENOMEM): the caller
  // turns that into this connect's failure.
  res.table = hv_.open_grant_table();
  res.evtchn = hv_.open_event_channel();
  if (auto ec = map_rings(q, index, res)) return ec;

  // Adopting, the frontend's ports wait unbound for this domain since the old daemon's ends
  // closed (Xen's evtchn_close leaves the remote end ECS_UNBOUND for us): bound again here.
  auto tx_port = res.evtchn->bind_interdomain(frontend_, q.evtchn_tx);
  if (!tx_port) return tx_port.error();
  res.tx_port = hv::BoundPort(*res.evtchn, *tx_port);
  if (q.split_event_channels()) {
    auto rx_port = res.evtchn->bind_interdomain(frontend_, q.evtchn_rx);
    if (!rx_port) return rx_port.error();
    res.rx_port = hv::BoundPort(*res.evtchn, *rx_port);
  }
  if (adopting_) {
    // One notification on each port: whatever the frontend signalled to the dead ends (and
    // the responses recovery pushed) is looked at now.
    (void)res.tx_port.notify();
    if (res.rx_port.bound()) (void)res.rx_port.notify();
  }

  // The queue fds were opened with the TAP (a rename by the hotplug script cannot misdirect
  // them); this attaches queue `index` and hands the queue its own descriptor.
  auto tap_fd = tap_->queue_fd(index);
  if (!tap_fd) return tap_fd.error();
  res.tap_fd = std::move(*tap_fd);

  res.offloads.sg = fe.sg;
  res.offloads.gso_tcpv4 = fe.sg && fe.gso_tcpv4;
  res.offloads.gso_tcpv6 = fe.sg && fe.gso_tcpv6;
  res.offloads.csum_ipv4 = fe.csum_ipv4;
  res.offloads.csum_ipv6 = fe.csum_ipv6;

  res.rx.frontend = frontend_;
  res.rx.coalesce = tunables_.rx_coalesce_full ? RxCoalesce::full : RxCoalesce::legacy;
  res.rx.sg = fe.sg;
  res.rx.xdp_headroom = fe.xdp_headroom;
  res.rx.queue_bytes = tunables_.rx_queue_bytes;
  // Without feature-rx-notify the frontend never kicks on refill: Linux then drains after
  // 30 ms and does no stall detection; the ring is polled at that interval instead.
  res.rx.drain_timeout = fe.rx_notify ? std::chrono::milliseconds(tunables_.rx_drain_timeout_ms)
                                      : std::chrono::milliseconds(30);
  res.rx.stall_timeout = std::chrono::milliseconds(tunables_.rx_stall_timeout_ms);
  res.rx.stall_detection = fe.rx_notify;
  if (!fe.rx_notify) res.rx.poll_interval = res.rx.drain_timeout;
  res.rx.copy_batch = tunables_.copy_batch;

  res.tx.frontend = frontend_;
  res.tx.limits.fatal_skb_slots = tunables_.fatal_skb_slots;
  res.tx.zerocopy.goodcopy_len = tunables_.goodcopy_len;
  res.tx.zerocopy.max_pending = tunables_.max_pending;
  res.tx.zerocopy.ring_size = ring::TxBackRing::kSize;
  res.tx.zerocopy.fallback = tunables_.zerocopy_fallback;
  res.tx.map_mode = tunables_.tx_map;
  // On a switch the queue's RX backlog is published on its link: senders drop before they
  // copy for a full queue.
  if (sw) res.rx.backlog = sw->self->backlog(sw->self);
  res.tx.sw = std::move(sw);
  res.rate_bytes = rate.bytes;
  res.rate_usecs = rate.usecs;
  res.hash = hash_;
  res.tx.mcast = mcast_;
  res.mcast = mcast_;
  res.steer = steer_;
  // Steered frames wait in the link's inbox: senders look at its backlog before they copy
  // (a queue on a switch publishes its backlog on the switch's link instead).
  if (steer_ && !res.rx.backlog) {
    const auto& link = (*steer_)[index];
    res.rx.backlog = link->backlog(link);
  }

  const std::string qprefix = prefix_ + "-q" + std::to_string(index);
  auto queue = std::make_unique<VifQueue>(
      loops_.next(tunables_.threads), std::move(res), qprefix,
      [this](const std::string& why) { report_fatal(why); },
      [this](bool ok) { on_queue_carrier(ok); });
  return queue;
}

std::error_code Vif::connect(const xenbus::FrontendConfig& fe, const xenbus::BackendConfig& be,
                             const xenbus::Rate& rate) {
  if (!tap_) return std::make_error_code(std::errc::no_such_device);
  disconnect();
  // The guest chooses what its connect costs (queues, split channels) and may retry at will:
  // it must never take the descriptors the control plane needs (fd_reserve.hpp).
  const std::size_t fds =
      kFdsPerConnect + kFdsPerQueue * fe.queues.size() + (fe.ctrl ? kFdsPerCtrlRing : 0);
  if (fd_reserve_ != nullptr && !fd_reserve_->allows(fds)) {
    log_guest(log::Level::warn, "cannot connect " + std::to_string(fe.queues.size()) +
                                    " queue(s): it may take " + std::to_string(fds) +
                                    " descriptors, and the daemon keeps its last " +
                                    std::to_string(fd_reserve_->floor()) + " free (" +
                                    std::to_string(free_fds()) + " free now)");
    return std::make_error_code(std::errc::too_many_files_open);
  }
  // Anything thrown while the queues are built (a descriptor, memory, an epoll registration
  // refused) fails this vif's connect, never the daemon: every queue made so far is stopped
  // and released, the switch port left.
  std::vector<std::unique_ptr<VifQueue>> queues;
  std::error_code ec;
  std::string what;
  if (!adopting_ && adoptable(fe, be)) {
    if (auto rec_ec = start_record(static_cast<std::uint32_t>(fe.queues.size()))) {
      log::write(log::Level::warn, prefix_,
                 "no state record (a restart will reconnect this vif): " + rec_ec.message());
    }
  }
  try {
    ec = connect_queues(fe, be, rate, queues);
  } catch (...) {
    ec = error_of_current_exception(what);
    log_guest(log::Level::warn, "cannot connect: " + what);
  }
  if (ec) {
    std::unique_ptr<CtrlRing> ctrl;
    {
      const std::lock_guard lock(mu_);
      ctrl.swap(ctrl_);
    }
    if (ctrl) ctrl->stop();
    for (auto& q : queues) q->stop();
    queues.clear();
    leave_switch();
    if (!adopting_) drop_record();
    return ec;
  }
  {
    const std::lock_guard lock(mu_);
    queues_ = std::move(queues);
  }
  log_guest(log::Level::info,
            "connected: " + std::to_string(fe.queues.size()) +
                " queue(s), sg=" + std::to_string(fe.sg) + " gso4=" + std::to_string(fe.gso_tcpv4) +
                " gso6=" + std::to_string(fe.gso_tcpv6) +
                (switch_ ? ", on internal switch " + switch_->name() : std::string()));
  return {};
}

std::error_code Vif::connect_queues(const xenbus::FrontendConfig& fe,
                                    const xenbus::BackendConfig& be, const xenbus::Rate& rate,
                                    std::vector<std::unique_ptr<VifQueue>>& queues) {
  disabled_ = false;
  {
    const std::lock_guard lock(reason_mu_);
    disabled_reason_.clear();
  }
  // The host side may now hand us what this frontend accepts on guest RX.
  net::TapOffloads off;
  off.csum = fe.csum_ipv4 || fe.csum_ipv6;
  off.tso4 = off.csum && fe.sg && fe.gso_tcpv4;
  off.tso6 = off.csum && fe.sg && fe.gso_tcpv6;
  if (auto ec = tap_->set_offloads(off)) {
    log::write(log::Level::warn, prefix_, "cannot set TAP offloads: " + ec.message());
  }
  // An internal switch: the vif's guest TX goes to the switch; the switch reaches each queue
  // through its link.
  std::vector<SwitchAttachment> attach;
  if (!be.switch_name.empty()) {
    if (switches_ == nullptr) {
      log_guest(log::Level::warn, "no internal switches here: cannot join " + be.switch_name);
      return std::make_error_code(std::errc::not_supported);
    }
    auto port = std::make_shared<SwitchPort>();
    port->dom = frontend_;
    port->dev = devid_;
    port->offloads.sg = fe.sg;
    port->offloads.gso_tcpv4 = fe.sg && fe.gso_tcpv4;
    port->offloads.gso_tcpv6 = fe.sg && fe.gso_tcpv6;
    port->offloads.csum_ipv4 = fe.csum_ipv4;
    port->offloads.csum_ipv6 = fe.csum_ipv6;
    for (std::size_t i = 0; i < fe.queues.size(); ++i)
      port->queues.push_back(std::make_shared<QueueLink>());
    switch_ = switches_->get(be.switch_name);
    switch_port_ = switch_->add_port(port);
    allow_mac_spoofing_->store(be.allow_mac_spoofing, std::memory_order_relaxed);
    if (!be.mac && !be.allow_mac_spoofing)
      log::write(log::Level::warn, prefix_, "no B:mac: the switch cannot check its source MACs");
    for (const auto& link : port->queues) {
      attach.push_back(SwitchAttachment{switch_, switch_port_, link,
                                        std::make_shared<std::atomic<bool>>(true), be.mac,
                                        allow_mac_spoofing_});
    }
  }
  // A new connection starts with an empty multicast list (netback frees it at disconnect);
  // an adopted one with the list its record kept, since the guest sends its groups only once.
  bool mcast_control = fe.multicast_control;
  if (adopting_ && record_.mcast() != nullptr) {
    if (const std::size_t bad = mcast_->restore(record_.mcast()->entries); bad != 0) {
      log::write(log::Level::warn, prefix_,
                 std::to_string(bad) + " multicast entries in the state record are no MAC");
    }
  } else {
    mcast_->clear();
    if (adopting_ && mcast_control) {
      // A record of an older version: the groups are not known. Unfiltered rather than none.
      mcast_control = false;
      log::write(log::Level::warn, prefix_,
                 "the state record holds no multicast list: multicast unfiltered until the "
                 "guest connects again");
    }
  }
  mcast_->set_enabled(mcast_control);
  mcast_->mirror_to(record_.mcast() != nullptr ? record_.mcast()->entries : nullptr);
  // The control ring (netif.h): its hash settings reach every queue; with several queues a
  // hashed frame moves to the queue the frontend's mapping names.
  hash_.reset();
  steer_.reset();
  if (fe.ctrl) {
    hash_ = std::make_shared<SharedHashSettings>();
    if (fe.queues.size() > 1) {
      auto links = std::make_shared<std::vector<std::shared_ptr<QueueLink>>>();
      for (std::size_t i = 0; i < fe.queues.size(); ++i)
        links->push_back(std::make_shared<QueueLink>());
      steer_ = std::move(links);
    }
  }
  for (std::uint32_t i = 0; i < fe.queues.size(); ++i) {
    auto q = make_queue(fe, i, rate,
                        attach.empty() ? std::nullopt : std::optional(std::move(attach[i])));
    if (!q) {
      // A guest can fail its connect in a loop: limited like its other lines.
      log_guest(log::Level::warn,
                "queue " + std::to_string(i) + ": cannot connect: " + q.error().message());
      return q.error();  // the caller releases the queues made so far (all-or-nothing)
    }
    queues.push_back(std::move(*q));
  }
  if (fe.ctrl) {
    auto ctrl =
        CtrlRing::open(loops_.next(tunables_.threads), hv_, frontend_, fe.ctrl->ring_ref,
                       fe.ctrl->evtchn, static_cast<std::uint32_t>(fe.queues.size()), hash_,
                       prefix_ + "-ctrl", [this](const std::string& why) { report_fatal(why); });
    if (!ctrl) {
      log_guest(log::Level::warn, "control ring: cannot connect: " + ctrl.error().message());
      return ctrl.error();
    }
    const std::lock_guard lock(mu_);
    ctrl_ = std::move(*ctrl);
  }
  for (auto& q : queues) q->start();
  if (ctrl_) ctrl_->start();
  return {};
}

void Vif::report_fatal(const std::string& why) {
  // The reason is in place before the flag says so: the daemon reads it once it sees
  // disabled().
  bool first = false;
  {
    const std::lock_guard lock(reason_mu_);
    if (disabled_reason_.empty()) {
      disabled_reason_ = why;
      first = true;
    }
  }
  if (first && !disabled_.exchange(true)) {
    log_guest(log::Level::warn, "disabling the vif: " + why);
    if (on_disabled_) on_disabled_();
  }
}

void Vif::on_queue_carrier(bool ok) {
  // netback: the carrier goes off for the whole vif when any queue stalls, so the host
  // stops queueing packets that cannot be delivered (they may hold other guests' pages).
  const int stalled = ok ? stalled_queues_.fetch_sub(1) - 1 : stalled_queues_.fetch_add(1) + 1;
  if (!tap_) return;
  (void)tap_->set_carrier(stalled == 0);
  // While the guest takes nothing, its TAP holds what netback's queue does: the frames over
  // it (up to 64 KiB each, tap-queue-len of them) are freed, and the host's next dropped.
  if (ok ? stalled == 0 : stalled == 1)
    (void)tap_->set_tx_queue_len(ok ? tunables_.tap_queue_len : kTapQueueLenStalled);
}

void Vif::leave_switch() {
  if (switch_) switch_->remove_port(switch_port_);
  switch_.reset();
  switch_port_ = 0;
}

Vif::Halted Vif::halt_queues() {
  Halted h;
  {
    const std::lock_guard lock(mu_);
    h.queues.swap(queues_);
    h.ctrl.swap(ctrl_);
  }
  // The control ring first: no new settings while the queues stop.
  if (h.ctrl) h.ctrl->stop();
  // Off the switch first: nothing new is routed to the queues while they stop.
  leave_switch();
  // Each queue stops between two passes: its record is then as a successor reads it.
  for (auto& q : h.queues) q->stop();
  return h;
}

bool Vif::stop_queues() {
  Halted h = halt_queues();
  h.ctrl.reset();
  const bool had = !h.queues.empty();
  h.queues.clear();  // unbinds the ports, unmaps the rings, detaches the TAP queues
  return had;
}

void Vif::disconnect() {
  if (stop_queues()) log_guest(log::Level::info, "disconnected");
  if (!adopting_) drop_record();  // nothing in flight any more: nothing for a successor
  if (stalled_queues_.exchange(0) != 0 && tap_) {
    (void)tap_->set_carrier(true);
    (void)tap_->set_tx_queue_len(tunables_.tap_queue_len);
  }
  if (tap_) (void)tap_->set_active_queues(1);
}

void Vif::rate_changed(const xenbus::Rate& rate) {
  const std::lock_guard lock(mu_);
  for (auto& q : queues_) q->set_rate(rate.bytes, rate.usecs);
}

void Vif::xdp_headroom_changed(std::uint32_t headroom) {
  const std::lock_guard lock(mu_);
  for (auto& q : queues_) q->set_xdp_headroom(headroom);
}

void Vif::mac_spoofing_changed(bool allowed) {
  allow_mac_spoofing_->store(allowed, std::memory_order_relaxed);
}

void Vif::multicast_control_changed(bool enabled) {
  // Watched (feature-dynamic-multicast-control): the list stays, only its use changes.
  mcast_->set_enabled(enabled);
  log::write(log::Level::debug, prefix_,
             std::string("multicast control ") + (enabled ? "on" : "off"));
}

VifReport Vif::report() const {
  VifReport r;
  r.frontend = frontend_;
  r.devid = devid_;
  r.tap_name = tap_ ? tap_->name() : std::string();
  r.adopted = adopted_;
  const std::lock_guard lock(mu_);
  r.connected = !queues_.empty();
  r.carrier = r.connected && stalled_queues_.load() == 0;
  for (const auto& q : queues_) {
    r.queues.push_back(q->report());
  }
  if (ctrl_ && !r.queues.empty()) {
    // The control ring is the vif's, not a queue's: its counters go with queue 0.
    const auto& c = ctrl_->counters();
    r.queues.front().counters.emplace_back("ctrl_requests", c.requests.load());
    r.queues.front().counters.emplace_back("ctrl_failed", c.failed.load());
    r.queues.front().counters.emplace_back("ctrl_events", c.events.load());
  }
  return r;
}

void Vif::log_guest(log::Level level, const std::string& msg) {
  log::write_limited(log_limit_, level, prefix_, msg);
}

}  // namespace unetback::vif
