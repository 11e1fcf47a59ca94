#include "frontend-shim/shim_loop.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sys/uio.h>
#include <unistd.h>

#include "common/net/flow_hash.hpp"
#include "common/net/frame.hpp"
#include "common/util/log.hpp"
#include "frontend-shim/guest_netdev.hpp"

namespace unetback::shim {

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr std::string_view kLog = "netfront-shim";
/// Frames read from one TAP queue before yielding to the other handlers.
constexpr int kTapBatch = 64;
/// A TSO super-frame is at most 64 KiB plus its Ethernet/VLAN header, behind the vnet header.
constexpr std::size_t kTapBufferLen = net::kVnetHdrLen + 65535 + 18 + 64;
/// While a TAP queue waits for TX slots, TX responses are also polled this often, in case a
/// notification is suppressed or lost (the event is the fast path, this the safety net).
constexpr auto kTxRetry = 1ms;
/// How long a clean disconnect waits for the backend to follow (Closing/Closed).
constexpr auto kDisconnectWait = 2000ms;

using xenbus::XenbusState;

std::optional<XenbusState> read_state(hv::XenStore& xs, const std::string& path) {
  auto v = xs.read(path);
  if (!v) return std::nullopt;
  return xenbus::parse_xenbus_state(*v);
}

std::string state_text(std::optional<XenbusState> s) {
  return s ? std::string(xenbus::state_name(*s)) : std::string("gone");
}

void info(const std::string& msg) {
  log::write(log::Level::info, kLog, msg);
}
void warn(const std::string& msg) {
  log::write(log::Level::warn, kLog, msg);
}
void error(const std::string& msg) {
  log::write(log::Level::error, kLog, msg);
}

netfront::NetfrontOptions netfront_options(const ShimOptions& o) {
  netfront::NetfrontOptions n;
  n.devid = o.devid;
  n.queues = o.queues;
  n.sg = o.sg;
  n.gso_tcpv4 = o.sg;
  n.gso_tcpv6 = o.sg;
  n.rx_budget = o.rx_budget;
  n.rx_refill = o.rx_refill;
  // A slow guest: the budget is what one token-bucket tick may take, so the bucket never
  // goes below zero (about 100 polls per second at most).
  if (o.rx_rate) n.rx_budget = std::clamp<std::uint32_t>(*o.rx_rate / 100, 1, o.rx_budget);
  n.ctrl_ring = o.rss;
  const ModeRules r = mode_rules(o.mode);
  n.always_write_num_queues = r.always_num_queues;
  n.feature_keys = r.feature_keys;
  n.rx_notify = r.rx_notify;
  n.rx_checks = r.rx_checks;
  n.request_multicast_control = r.mcast_extras;
  n.split_event_channels = r.split_event_channels;
  n.xdp_headroom = o.xdp_headroom;
  return n;
}

/// Microsoft's RSS verification key (the one Windows uses unless configured otherwise).
constexpr std::array<std::uint8_t, 40> kRssKey{
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
constexpr auto kRssFilePoll = 200ms;
/// How often --mode xenvif looks at the guest's multicast list.
constexpr auto kMcastPoll = 200ms;
constexpr auto kXdpFilePoll = 200ms;
/// How long a reconfiguration waits for the backend's Reconfigured (Linux netfront waits
/// forever; a test tool would rather say so and go back to Connected).
constexpr auto kXdpReconfigureWait = 5s;

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(std::size_t{64} * 1024, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace

ShimLoop::ShimLoop(std::unique_ptr<hv::Hypervisor> hv, HypervisorOpener reopen, ShimOptions opts,
                   std::ostream& ready_out)
    : hv_(std::move(hv)),
      reopen_(std::move(reopen)),
      opts_(std::move(opts)),
      ready_out_(ready_out),
      nf_opts_(netfront_options(opts_)),
      signals_(io_, SIGTERM, SIGINT),
      resume_signal_(io_),
      rules_(mode_rules(opts_.mode)),
      deadline_timer_(io_),
      rx_timer_(io_),
      tx_retry_timer_(io_),
      rss_timer_(io_),
      mcast_timer_(io_),
      xdp_timer_(io_),
      close_timer_(io_),
      ctrl_runner_(io_.get_executor()) {}

ShimLoop::~ShimLoop() {
  try {
    teardown(0ms);
    if (xs_desc_) (void)xs_desc_->release();
  } catch (...) {
    // Nothing to tell anyone from a destructor: the process is going anyway.
  }
}

bool ShimLoop::open_domain() {
  const std::string home = "/local/domain/" + std::to_string(hv_->self().value());
  fe_dir_ = home + "/device/vif/" + std::to_string(opts_.devid.value());
  shutdown_path_ = home + "/control/shutdown";
  try {
    xs_ = hv_->open_xenstore();
    nf_ = std::make_unique<netfront::Netfront>(*hv_, nf_opts_);
  } catch (const SetupError& e) {
    error(e.what());
    return false;
  }
  if (!xs_->read(fe_dir_ + "/backend")) {
    error("no vif " + fe_dir_ + " (has the toolstack added it?)");
    return false;
  }
  if (auto ec = reset_stale_frontend()) warn("resetting the frontend state: " + ec.message());
  if (auto ec = xs_->watch(fe_dir_, "fe")) {
    error("watch " + fe_dir_ + ": " + ec.message());
    return false;
  }
  // The toolstack's requests (xen/manage.c watches control/shutdown the same way).
  if (opts_.resume_file) {
    if (auto ec = xs_->watch(shutdown_path_, "ctl")) {
      error("watch " + shutdown_path_ + ": " + ec.message());
      return false;
    }
  }
  watched_be_state_.clear();
  xs_desc_ = std::make_unique<Descriptor>(io_, xs_->watch_fd());
  arm_xs_watch();
  return true;
}

int ShimLoop::run() {
  if (opts_.xdp_headroom_file) {
    if (auto v = read_xdp_file()) nf_opts_.xdp_headroom = *v;
  }
  if (!open_domain()) return kExitSetupFailure;
  if (opts_.resume_file && reopen_) {
    resume_signal_.add(SIGUSR1);
    arm_resume_signal();
  }

  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    info("signal " + std::to_string(sig) + ": disconnecting");
    stop(kExitClean);
  });
  arm_connect_deadline();
  evaluate();
  io_.run();
  teardown(kDisconnectWait);
  if (xs_desc_) (void)xs_desc_->release();
  xs_desc_.reset();
  const auto& s = nf_totals_;
  info("stopped: tap_rx=" + std::to_string(stats_.tap_rx_frames) + " tap_rx_dropped=" +
       std::to_string(stats_.tap_rx_dropped) + " tap_tx=" + std::to_string(stats_.tap_tx_frames) +
       " tap_tx_dropped=" + std::to_string(stats_.tap_tx_dropped) + " tx_busy_stalls=" +
       std::to_string(stats_.tx_busy_stalls) + " reconnects=" + std::to_string(stats_.reconnects) +
       " xdp_reconfigurations=" + std::to_string(stats_.xdp_reconfigurations) +
       " xdp_reconfigure_timeouts=" + std::to_string(stats_.xdp_reconfigure_timeouts) +
       " tx_frags=" + std::to_string(stats_.tx_frags) + " tx_frags_fallback=" +
       std::to_string(stats_.tx_frags_fallback) + " nf_tx_packets=" + std::to_string(s.tx_packets) +
       " nf_rx_packets=" + std::to_string(s.rx_packets) +
       " mode=" + std::string(frontend_mode_name(opts_.mode)) +
       " rx_protocol_errors=" + std::to_string(s.rx_protocol_errors) + " rx_slot_checked=" +
       std::to_string(s.rx_slot_checked) + " rx_gso_checked=" + std::to_string(s.rx_gso_checked) +
       " tx_hash_extras=" + std::to_string(stats_.tx_hash_extras) +
       " mcast_added=" + std::to_string(stats_.mcast_added) +
       " mcast_removed=" + std::to_string(stats_.mcast_removed) +
       " rx_notify_sent=" + std::to_string(s.rx_notify_sent));
  return exit_code_;
}

void ShimLoop::arm_connect_deadline() {
  deadline_timer_.expires_after(std::chrono::milliseconds(opts_.connect_timeout_ms));
  deadline_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || ever_ready_) return;
    const std::string what =
        rules_.per_state_wait && deadline_state_
            ? "backend stayed in state " + std::string(xenbus::state_name(*deadline_state_)) +
                  " for " + std::to_string(opts_.connect_timeout_ms) + " ms"
            : "not connected within " + std::to_string(opts_.connect_timeout_ms) + " ms";
    error(what + " (backend " + (be_dir_.empty() ? fe_dir_ + "/backend" : be_dir_) +
          " never reached Connected)");
    stop(kExitSetupFailure);
  });
}

void ShimLoop::stop(int code) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = code;
  signals_.cancel();
  resume_signal_.cancel();
  deadline_timer_.cancel();
  // The loop stops once the backend has followed the close (finish_close), not before.
  begin_close();
  if (!nf_ || !nf_->closing()) io_.stop();
}

std::error_code ShimLoop::reset_stale_frontend() {
  // A previous shim for this domain may have left the frontend Connected (it crashed) or
  // Closed (it stopped cleanly). Like Linux's xenbus_reset_state at boot, close what is
  // stale and start over from Initialising once the backend is Closed (evaluate()).
  const auto fe = read_state(*xs_, fe_dir_ + "/state");
  if (!fe || *fe == XenbusState::initialising) return {};
  restart_pending_ = true;
  if (*fe == XenbusState::closed) return {};
  return xs_->write(fe_dir_ + "/state", xenbus::to_xs_string(XenbusState::closed));
}

void ShimLoop::arm_xs_watch() {
  xs_desc_->async_wait(Descriptor::wait_read, [this](const boost::system::error_code& ec) {
    // While stopping, the watch still says when the backend has followed the close.
    if (ec || !xs_ || (stopping_ && !nf_->closing())) return;
    while (xs_->read_watch()) {
    }
    evaluate();
    // A suspended guest may have let its domain (and this connection) go in evaluate().
    if (xs_desc_ && (!stopping_ || nf_->closing())) arm_xs_watch();
  });
}

void ShimLoop::watch_backend(const std::string& be_dir) {
  const std::string path = be_dir + "/state";
  if (path == watched_be_state_) return;
  if (!watched_be_state_.empty()) (void)xs_->unwatch(watched_be_state_, "be");
  watched_be_state_.clear();
  if (auto ec = xs_->watch(path, "be")) {
    warn("watch " + path + ": " + ec.message());
    return;
  }
  watched_be_state_ = path;
}

void ShimLoop::evaluate() {
  if (!nf_) return;  // suspended, the domain released
  if (suspended_) {
    if (!stopping_) release_suspended_domain();
    return;
  }
  if (opts_.resume_file && reopen_ && !stopping_) {
    if (auto req = xs_->read(shutdown_path_); req && *req == "suspend") {
      suspend();
      return;
    }
  }
  if (nf_->closing()) {
    // Our Closing is out: Closed (and the grants revoked) once the backend follows.
    if (!nf_->backend_closing()) return;
    finish_close();
  }
  if (stopping_) return;
  auto be = xs_->read(fe_dir_ + "/backend");
  if (!be && be.error() != std::errc::no_such_file_or_directory) {
    // Not "no such node": the store itself is unreachable (libxenstore reports its dead socket
    // as EINVAL/EPIPE...). Its watch fd stays readable forever, so looping would only spin.
    error("xenstore: " + be.error().message() + ": the store is gone, stopping");
    stop(kExitXenstoreLost);
    return;
  }
  if (!be) {
    // The toolstack removed the device: nothing to talk to until it adds it again.
    if (nf_->connected()) {
      info("the vif was removed: disconnecting");
      begin_close();
      restart_pending_ = true;
    }
    return;
  }
  be_dir_ = *be;
  watch_backend(be_dir_);
  auto state = read_state(*xs_, be_dir_ + "/state");
  if (rules_.per_state_wait && !ever_ready_ && state != deadline_state_) {
    // win-xenvif: each backend state is waited for on its own (120 s), not the connect.
    deadline_state_ = state;
    arm_connect_deadline();
  }
  if (nf_->connected()) {
    if (!state || *state == XenbusState::closing || *state == XenbusState::closed) {
      // netfront: the backend Closing/Closed closes the frontend.
      info("backend state " + state_text(state) + ": disconnecting");
      begin_close();
      restart_pending_ = true;
      if (nf_->closing()) return;
      state = read_state(*xs_, be_dir_ + "/state");
    } else if (*state == XenbusState::init_wait && announced_) {
      // Connected (we saw 4), and now InitWait without a close in between: a restarted
      // backend that probed the device afresh (Linux netback reloaded does this). Our rings
      // mean nothing to it: start over (once it has followed our Closing, or given up on).
      info("backend went back to InitWait: reconnecting");
      begin_close();
      restart_pending_ = true;
      if (nf_->closing()) return;
      state = read_state(*xs_, be_dir_ + "/state");
    } else {
      if (xdp_change_since_ && *state == XenbusState::reconfigured) {
        // The backend has taken the new headroom: back to Connected (xennet_xdp_set).
        xdp_change_since_.reset();
        if (auto ec = nf_->end_xdp_headroom_change()) {
          warn("writing frontend state 4: " + ec.message());
        } else {
          ++stats_.xdp_reconfigurations;
          info("backend Reconfigured: guest RX with " + std::to_string(nf_->xdp_headroom()) +
               " bytes of XDP headroom, Connected again");
        }
        return;
      }
      if (*state == XenbusState::connected && !announced_) {
        announced_ = true;
        if (!ever_ready_) {
          ever_ready_ = true;
          deadline_timer_.cancel();
        }
        if (rules_.mcast_extras) sync_mcast();
        if (opts_.xdp_headroom_file) arm_xdp_timer();
        configure_rss();
      }
      return;
    }
  }
  // Disconnected. After a close, say Initialising once the backend is Closed (our backend
  // and Linux's take 1 after 6 as "starting over" and offer InitWait again); never while it
  // is still Closing, where a coalesced 6->1 could look like no acknowledgement at all.
  if (restart_pending_ && state && *state != XenbusState::closing) {
    if (read_state(*xs_, fe_dir_ + "/state")) {
      if (auto ec = xs_->write(fe_dir_ + "/state", xenbus::to_xs_string(XenbusState::initialising)))
        warn("writing frontend state 1: " + ec.message());
    }
    restart_pending_ = false;
  }
  if (state && *state == XenbusState::init_wait) connect_now();
}

void ShimLoop::suspend() {
  // xen/manage.c: the request is acknowledged by writing "" back; then the domain suspends.
  if (auto ec = xs_->write(shutdown_path_, "")) {
    warn("acknowledging the suspend request: " + ec.message());
    return;
  }
  info("suspend requested: the data path stops; the backend is told nothing");
  ++stats_.suspends;
  stop_data_path();
  close_timer_.cancel();
  deadline_timer_.cancel();
  suspended_ = true;
  release_suspended_domain();
}

void ShimLoop::release_suspended_domain() {
  // The toolstack tears the device down (backend Closed, nodes deleted) before it destroys
  // the domain, as libxl's save does: until then the rings stay as they were.
  auto be = xs_->read(fe_dir_ + "/backend");
  if (be || be.error() != std::errc::no_such_file_or_directory) return;
  const DomId old = hv_->self();
  let_domain_go();
  info("suspended: domain " + std::to_string(old.value()) + " released, waiting for SIGUSR1");
}

void ShimLoop::let_domain_go() {
  // The descriptor never owns the watch fd (release() takes it out of the reactor).
  if (xs_desc_) (void)xs_desc_->release();
  xs_desc_.reset();
  nf_->drop_rings();
  nf_.reset();
  xs_.reset();
  hv_.reset();  // the domain goes with its broker connection
}

void ShimLoop::arm_resume_signal() {
  resume_signal_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec || stopping_) return;
    resume();
    if (!stopping_) arm_resume_signal();
  });
}

void ShimLoop::resume() {
  if (!suspended_) {
    warn("SIGUSR1 while not suspended: ignored");
    return;
  }
  const auto text = slurp(*opts_.resume_file);
  std::optional<std::uint16_t> domid;
  if (text && text->starts_with("domid ")) {
    std::string_view v(*text);
    v.remove_prefix(6);
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
    domid = hv::parse_xs_uint<std::uint16_t>(v);
  }
  if (!domid || *domid == 0) {
    warn("SIGUSR1: " + *opts_.resume_file + " does not say \"domid N\": still suspended");
    return;
  }
  if (hv_ && hv_->self().value() == *domid) {
    warn("SIGUSR1: resuming in domain " + std::to_string(*domid) +
         ", the one still held, is not supported: still suspended");
    return;
  }
  (void)std::remove(opts_.resume_file->c_str());
  if (hv_) {
    // Resumed elsewhere before the toolstack removed our old device: let the old domain go.
    let_domain_go();
  }
  try {
    hv_ = reopen_(DomId{*domid});
  } catch (const SetupError& e) {
    error("resume as domain " + std::to_string(*domid) + ": " + e.what());
    stop(kExitSetupFailure);
    return;
  }
  if (!open_domain()) {
    stop(kExitSetupFailure);
    return;
  }
  suspended_ = false;
  restart_pending_ = false;
  garp_pending_ = true;
  ++stats_.resumes;
  info("resumed as domain " + std::to_string(*domid) + ": connecting " + fe_dir_);
  evaluate();
}

void ShimLoop::send_gratuitous_arp() {
  garp_pending_ = false;
  const auto ip = ipv4_address(opts_.tap);
  if (!ip || !tap_) return;  // nothing to announce
  const auto frame = gratuitous_arp(guest_mac_.octets, *ip);
  if (auto sent = nf_->send(frame); !sent) {
    warn("gratuitous ARP: " + sent.error().message());
    return;
  }
  ++stats_.gratuitous_arps;
}

bool ShimLoop::connect_now() {
  // evaluate() has seen InitWait: connect() only looks again, it does not wait.
  if (auto ec = nf_->connect(0ms)) {
    warn("connect: " + ec.message() + " (will retry when the backend state changes)");
    return false;
  }
  negotiated_ = negotiate_tx(nf_opts_, nf_->backend_features());
  if (!tap_) {
    if (!setup_tap()) {
      stop(kExitSetupFailure);
      return false;
    }
  } else {
    // A reconnected backend may offer other features: the guest kernel must hand us only
    // what this connection can carry.
    if (auto ec = tap_->set_offloads(tap_offloads(negotiated_)))
      warn("TAP offloads: " + ec.message());
    ++stats_.reconnects;
  }
  attach_data_path();
  info("connected to " + be_dir_ + ": " + std::to_string(nf_->num_queues()) + " queue(s), sg=" +
       std::to_string(negotiated_.sg) + " tso4=" + std::to_string(negotiated_.gso_tcpv4) +
       " tso6=" + std::to_string(negotiated_.gso_tcpv6) +
       " rx-refill=" + std::string(netfront::rx_refill_rule_name(opts_.rx_refill)) +
       " tx-frags=" + (tx_frag_size() ? std::to_string(*tx_frag_size()) : std::string("off")) +
       " mode=" + std::string(frontend_mode_name(opts_.mode)));
  return true;
}

bool ShimLoop::setup_tap() {
  auto mac_text = xs_->read(fe_dir_ + "/mac");
  if (!mac_text) {
    error("no " + fe_dir_ + "/mac: " + mac_text.error().message());
    return false;
  }
  auto mac = net::parse_mac(*mac_text);
  if (!mac) {
    error("bad " + fe_dir_ + "/mac '" + *mac_text + "'");
    return false;
  }
  net::TapConfig cfg;
  cfg.name = opts_.tap;
  cfg.vnet_hdr = true;
  cfg.offloads = tap_offloads(negotiated_);
  cfg.non_blocking = true;
  cfg.multi_queue = nf_->num_queues() > 1;
  cfg.queues = nf_->num_queues();
  cfg.mac = *mac;
  guest_mac_ = *mac;
  cfg.mtu = opts_.mtu;
  std::string what;
  auto tap = create_guest_tap(cfg, opts_.address.value_or(""), what);
  if (!tap) {
    error(what + ": " + tap.error().message());
    return false;
  }
  if (tap->vnet_hdr_len() != net::kVnetHdrLen) {
    error("unexpected vnet header length " + std::to_string(tap->vnet_hdr_len()));
    return false;
  }
  tap_ = std::move(*tap);
  for (std::uint32_t i = 1; i < nf_->num_queues(); ++i) {
    auto fd = tap_->queue_fd(i);
    if (!fd) {
      error("attach TAP queue " + std::to_string(i) + ": " + fd.error().message());
      return false;
    }
    extra_tap_fds_.push_back(std::move(*fd));
  }
  return true;
}

int ShimLoop::tap_fd(std::size_t i) const {
  return i == 0 ? tap_->fd() : extra_tap_fds_[i - 1].get();
}

QueueId ShimLoop::tx_queue_for(std::size_t tap_index) const {
  return QueueId{static_cast<std::uint32_t>(tap_index % nf_->num_queues())};
}

void ShimLoop::attach_data_path() {
  const std::size_t ntap = 1 + extra_tap_fds_.size();
  tap_queues_.resize(ntap);
  for (std::size_t i = 0; i < ntap; ++i) {
    auto& tq = tap_queues_[i];
    tq.desc = std::make_unique<Descriptor>(io_, tap_fd(i));
    tq.buf.resize(kTapBufferLen);
    tq.pending_buf = {};
    tq.pending_meta.reset();
    tq.pending_frags.reset();
    tq.waiting = false;
  }
  event_queues_.resize(nf_->num_queues());
  for (std::uint32_t q = 0; q < nf_->num_queues(); ++q) {
    auto& eq = event_queues_[q];
    eq.desc = std::make_unique<Descriptor>(io_, nf_->event_fd(QueueId{q}));
    eq.waiting = false;
    eq.poll_posted = false;
  }
  tokens_ = nf_opts_.rx_budget;
  tokens_at_ = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < ntap; ++i) on_tap_readable(i);
  for (std::size_t q = 0; q < event_queues_.size(); ++q) {
    arm_event(q);
    rx_poll(q);
  }
}

std::optional<std::vector<std::uint32_t>> ShimLoop::read_rss_file() {
  auto text = slurp(*opts_.rss_mapping_file);
  if (!text) {
    warn("cannot read " + *opts_.rss_mapping_file + ": keeping the mapping in use");
    return std::nullopt;
  }
  if (*text == rss_file_text_) return std::nullopt;
  rss_file_text_ = *text;
  auto table = parse_rss_mapping(*text, nf_->num_queues());
  if (!table) {
    warn(*opts_.rss_mapping_file + ": not 1..128 queue numbers below " +
         std::to_string(nf_->num_queues()) + ": keeping the mapping in use");
  }
  return table;
}

void ShimLoop::configure_rss() {
  netfront::CtrlClient* ctrl = nf_ ? nf_->ctrl() : nullptr;
  if (!opts_.rss) {
    announce_ready();
    return;
  }
  if (ctrl == nullptr) {
    warn("--rss: the backend offers no control ring");
    announce_ready();
    return;
  }
  std::vector<std::uint32_t> table(128);
  for (std::uint32_t i = 0; i < table.size(); ++i) table[i] = i % nf_->num_queues();
  if (opts_.rss_mapping_file) {
    rss_file_text_.clear();
    if (auto t = read_rss_file()) table = std::move(*t);
  }
  auto steps = ctrl->rss_steps(kRssKey, table, wire::kHashTypesAll);
  auto done = [this, gen = generation_, entries = table.size()](std::error_code ec) {
    if (gen != generation_ || !nf_ || nf_->ctrl() == nullptr) return;
    if (ec) {
      warn("RSS through the control ring failed: " + ec.message() + " (traffic goes on unhashed)");
    } else {
      info("RSS on: Toeplitz, " + std::to_string(entries) + "-entry mapping, " +
           std::to_string(nf_->ctrl()->requests()) + " control requests");
      if (opts_.rss_mapping_file) arm_rss_timer();
    }
    announce_ready();
  };
  if (!steps) {
    done(steps.error());
    return;
  }
  if (auto ec = ctrl_runner_.start(*ctrl, std::move(*steps), done)) done(ec);
}

void ShimLoop::announce_ready() {
  if (!ready_said_) {
    ready_said_ = true;
    ready_out_ << "netfront-shim ready domid=" << hv_->self().value()
               << " devid=" << opts_.devid.value() << " tap=" << opts_.tap
               << " queues=" << nf_->num_queues() << std::endl;
  } else {
    info("reconnected (" + std::to_string(nf_->num_queues()) + " queues)");
  }
  // netback_changed(Connected): netdev_notify_peers, once per resume.
  if (garp_pending_) send_gratuitous_arp();
}

void ShimLoop::arm_rss_timer() {
  rss_timer_.expires_after(kRssFilePoll);
  rss_timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || !nf_ || nf_->ctrl() == nullptr) return;
    auto table = read_rss_file();
    if (!table) {
      arm_rss_timer();
      return;
    }
    auto steps = nf_->ctrl()->mapping_steps(*table);
    // The next look at the file once this table has been answered (or given up on).
    auto done = [this, gen, entries = table->size()](std::error_code e) {
      if (gen != generation_ || !nf_ || nf_->ctrl() == nullptr) return;
      if (e) {
        warn("re-mapping failed: " + e.message());
      } else {
        info("re-mapped: " + std::to_string(entries) + "-entry table");
      }
      arm_rss_timer();
    };
    if (!steps) {
      done(steps.error());
      return;
    }
    if (auto e = ctrl_runner_.start(*nf_->ctrl(), std::move(*steps), done)) done(e);
  });
}

std::optional<std::uint32_t> ShimLoop::read_xdp_file() {
  auto text = slurp(*opts_.xdp_headroom_file);
  if (!text) {
    if (xdp_file_text_ != "\n(unreadable)")
      warn("cannot read " + *opts_.xdp_headroom_file + ": keeping the headroom in use");
    xdp_file_text_ = "\n(unreadable)";
    return std::nullopt;
  }
  auto v = parse_xdp_headroom(*text);
  if (!v && *text != xdp_file_text_)
    warn(*opts_.xdp_headroom_file + ": not a decimal 0..32767: keeping the headroom in use");
  xdp_file_text_ = *text;
  return v;
}

void ShimLoop::arm_xdp_timer() {
  xdp_timer_.expires_after(kXdpFilePoll);
  xdp_timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || !nf_ || !nf_->connected()) return;
    if (xdp_change_since_) {
      if (std::chrono::steady_clock::now() - *xdp_change_since_ >= kXdpReconfigureWait) {
        warn("the backend never said Reconfigured: Connected again");
        xdp_change_since_.reset();
        ++stats_.xdp_reconfigure_timeouts;
        if (auto e = nf_->end_xdp_headroom_change())
          warn("writing frontend state 4: " + e.message());
      }
    } else if (auto want = read_xdp_file(); want && *want != nf_->xdp_headroom()) {
      if (!nf_->backend_features().xdp_headroom) {
        if (xdp_unoffered_ != want) {
          warn("the backend offers no feature-xdp-headroom: headroom " + std::to_string(*want) +
               " not asked for");
        }
        xdp_unoffered_ = want;
      } else if (auto e = nf_->begin_xdp_headroom_change(*want)) {
        warn("reconfiguring the XDP headroom: " + e.message());
      } else {
        info("Reconfiguring: xdp-headroom " + std::to_string(*want));
        xdp_change_since_ = std::chrono::steady_clock::now();
      }
    }
    arm_xdp_timer();
  });
}

void ShimLoop::stop_data_path() {
  ++generation_;
  // Give the fds back before Netfront closes its event channels (the descriptors never own
  // them: release() also takes them out of the reactor).
  for (auto& tq : tap_queues_)
    if (tq.desc) (void)tq.desc->release();
  for (auto& eq : event_queues_)
    if (eq.desc) (void)eq.desc->release();
  tap_queues_.clear();
  event_queues_.clear();
  rx_timer_.cancel();
  tx_retry_timer_.cancel();
  rss_timer_.cancel();
  ctrl_runner_.cancel();
  mcast_timer_.cancel();
  mcast_known_.clear();  // a new connection starts with an empty filter
  xdp_timer_.cancel();
  xdp_change_since_.reset();
  rx_timer_armed_ = tx_retry_armed_ = false;
  announced_ = false;
  if (nf_ && nf_->connected())
    nf_totals_ += nf_->stats();  // the queues (and their counters) go with the connection
}

void ShimLoop::teardown(std::chrono::milliseconds wait_for_backend) {
  stop_data_path();
  close_timer_.cancel();
  if (nf_) nf_->disconnect(wait_for_backend);
}

void ShimLoop::begin_close() {
  if (!nf_ || !nf_->connected()) return;
  stop_data_path();
  nf_->begin_disconnect();
  if (nf_->backend_closing()) {
    finish_close();
    return;
  }
  // The watch on the backend's state ends the wait (evaluate); this timer gives up on it.
  close_timer_.expires_after(kDisconnectWait);
  close_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !nf_ || !nf_->closing()) return;
    warn("the backend did not follow the close within " + std::to_string(kDisconnectWait.count()) +
         " ms: closing anyway");
    finish_close();
    evaluate();
  });
}

void ShimLoop::finish_close() {
  close_timer_.cancel();
  nf_->finish_disconnect();
  if (stopping_) io_.stop();
}

// --- guest TX: TAP -> netfront ---

void ShimLoop::arm_tap(std::size_t i) {
  auto& tq = tap_queues_[i];
  if (tq.waiting) return;
  tq.waiting = true;
  tq.desc->async_wait(Descriptor::wait_read,
                      [this, i, gen = generation_](const boost::system::error_code& ec) {
                        if (gen != generation_ || stopping_) return;
                        tap_queues_[i].waiting = false;
                        if (!ec) on_tap_readable(i);
                      });
}

void ShimLoop::on_tap_readable(std::size_t i) {
  auto& tq = tap_queues_[i];
  const QueueId q = tx_queue_for(i);
  for (int n = 0;; ++n) {
    if (tq.pending_meta) {
      const bool in_pages = tq.pending_buf.size() > 0;
      const std::size_t len = in_pages ? tq.pending_buf.size() : tq.pending_len - net::kVnetHdrLen;
      const auto frame = std::span<const std::byte>(tq.buf).subspan(net::kVnetHdrLen, len);
      // --tx-frags: the frame's Linux-like slot chain (its TxMeta, GSO included, unchanged).
      // A frame read into granted pages goes as it lies (zerocopy or copied, as the
      // PendingLimiter decides); on busy the buffer stays with us.
      auto sent = in_pages ? nf_->send(std::move(tq.pending_buf), *tq.pending_meta, q)
                  : tq.pending_frags
                      ? nf_->send_raw(tq.pending_frags->span(), frame, *tq.pending_meta, {}, q)
                      : nf_->send(frame, *tq.pending_meta, q);
      if (!sent && sent.error() == std::errc::resource_unavailable_try_again) {
        // Paused: not reading the TAP leaves the backlog in the guest kernel's queue.
        ++stats_.tx_busy_stalls;
        schedule_tx_retry();
        return;
      }
      if (!sent) {
        ++stats_.tap_rx_dropped;
        static log::RateLimit limit;
        std::uint64_t suppressed = 0;
        if (limit.allow(suppressed))
          warn("dropping a " + std::to_string(len) + "-byte frame: " + sent.error().message());
      }
      if (sent && tq.pending_frags) ++stats_.tx_frags;
      tq.pending_buf = {};
      tq.pending_meta.reset();
      tq.pending_frags.reset();
    }
    if (n >= kTapBatch) {
      // Yield to RX and the other queues, then carry on.
      asio::post(io_, [this, i, gen = generation_] {
        if (gen == generation_ && !stopping_ && !tap_queues_[i].waiting) on_tap_readable(i);
      });
      return;
    }
    const auto read = read_tap_frame(i, q);
    if (read == TapRead::again) {
      arm_tap(i);
      return;
    }
  }
}

std::optional<std::uint32_t> ShimLoop::tx_frag_size() const {
  if (opts_.tx_frags) return opts_.tx_frags;
  if (rules_.tx_chain_piece != 0 && negotiated_.sg) return rules_.tx_chain_piece;
  return std::nullopt;
}

void ShimLoop::add_tx_hash(netfront::TxMeta& meta, std::span<const std::byte> head) {
  // win-xenvif attaches the packet's hash to TX: here its Toeplitz hash under the RSS key,
  // over the widest of the four types the frame has (nothing for a frame that is not IP).
  const auto h = net::toeplitz_frame_hash(kRssKey, wire::kHashTypesAll, head);
  if (!h) return;
  meta.hash = netfront::RxHash{h->type, XEN_NETIF_CTRL_HASH_ALGORITHM_TOEPLITZ, h->value};
  ++stats_.tx_hash_extras;
}

void ShimLoop::arm_mcast_timer() {
  mcast_timer_.expires_after(kMcastPoll);
  mcast_timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || stopping_) return;
    sync_mcast();
  });
}

void ShimLoop::sync_mcast() {
  // /proc/net is the reading process's namespace: the guest's, where the TAP lives.
  if (auto text = slurp("/proc/net/dev_mcast")) {
    const auto wanted = parse_dev_mcast(*text, opts_.tap);
    const McastDelta d = mcast_delta(mcast_known_, wanted);
    // One dummy request (one slot of size 0) per change, netif.h's way to amend the filter;
    // a busy ring leaves the rest for the next look.
    auto send = [&](const McastAddr& a, bool add) {
      netfront::TxMeta meta;
      meta.mcast = netfront::TxMeta::Mcast{add, a};
      const netfront::RawTxSlot slot{0, 0};
      return nf_->send_raw(std::span(&slot, 1), {}, meta, std::uint16_t{0}).has_value();
    };
    for (const McastAddr& a : d.remove) {
      if (!send(a, false)) break;
      mcast_known_.erase(std::find(mcast_known_.begin(), mcast_known_.end(), a));
      ++stats_.mcast_removed;
    }
    for (const McastAddr& a : d.add) {
      if (!send(a, true)) break;
      mcast_known_.insert(std::lower_bound(mcast_known_.begin(), mcast_known_.end(), a), a);
      ++stats_.mcast_added;
    }
  }
  arm_mcast_timer();
}

ShimLoop::TapRead ShimLoop::read_tap_frame(std::size_t i, QueueId q) {
  auto& tq = tap_queues_[i];
  // Straight into granted pages (no copy before the send) unless --tx-frags wants the
  // frame linear or the queue's TX pool is out of pages; then into our own buffer.
  netfront::TxBuffer buf;
  const auto frag_size = tx_frag_size();
  if (!frag_size) {
    if (auto b = nf_->alloc_tx_buffer(negotiated_.sg ? wire::kMaxTxSize : wire::kPageSize, q))
      buf = std::move(*b);
  }
  net::VirtioNetHdr hdr{};
  std::array<iovec, 2 + netfront::kMaxTxDataSlots> iov{};
  std::size_t niov = 0;
  std::size_t room = 0;
  if (buf.size() > 0) {
    iov[niov++] = {&hdr, net::kVnetHdrLen};
    for (std::size_t s = 0; s < buf.segment_count(); ++s) {
      const auto seg = buf.segment(s);
      iov[niov++] = {seg.data(), seg.size()};
    }
    room = net::kVnetHdrLen + buf.size();
    // Anything past the pages (a frame too long for netif) lands here and is dropped.
    iov[niov++] = {tq.buf.data(), tq.buf.size()};
  } else {
    iov[niov++] = {tq.buf.data(), tq.buf.size()};
    room = tq.buf.size();
  }
  ssize_t got;
  do {
    got = ::readv(tap_fd(i), iov.data(), static_cast<int>(niov));
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    if (errno != EAGAIN) warn("TAP read: " + last_errno().message());
    return TapRead::again;
  }
  const auto len = static_cast<std::size_t>(got);
  if (len < net::kVnetHdrLen + net::kEthHeaderLen || (buf.size() > 0 && len > room)) {
    ++stats_.tap_rx_dropped;
    return TapRead::dropped;
  }
  ++stats_.tap_rx_frames;
  if (buf.size() > 0) {
    if (buf.shrink(len - net::kVnetHdrLen)) {
      ++stats_.tap_rx_dropped;
      return TapRead::dropped;
    }
    std::array<std::span<std::byte>, netfront::kMaxTxDataSlots> pieces;
    for (std::size_t s = 0; s < buf.segment_count(); ++s) pieces[s] = buf.segment(s);
    auto meta = tap_frame_to_tx(hdr, std::span(pieces.data(), buf.segment_count()), negotiated_);
    if (!meta) {
      ++stats_.tap_rx_dropped;
      return TapRead::dropped;
    }
    if (rules_.tx_hash_extras) add_tx_hash(*meta, pieces[0]);
    tq.pending_buf = std::move(buf);
    tq.pending_meta = *meta;
    tq.pending_frags.reset();
    return TapRead::frame;
  }
  const auto vhdr = net::load_vnet_hdr(tq.buf);
  auto frame = std::span<std::byte>(tq.buf).subspan(net::kVnetHdrLen, len - net::kVnetHdrLen);
  auto meta = tap_frame_to_tx(*vhdr, frame, negotiated_);
  if (!meta) {
    ++stats_.tap_rx_dropped;
    return TapRead::dropped;
  }
  if (rules_.tx_hash_extras) add_tx_hash(*meta, frame);
  tq.pending_len = len;
  tq.pending_meta = *meta;
  tq.pending_frags.reset();
  if (frag_size) {
    // Planned once per frame (after tap_frame_to_tx, which may complete a checksum), so a
    // frame that waits for slots is counted once.
    auto layout = plan_tx_frags(frame, *frag_size);
    if (layout) {
      tq.pending_frags = *layout;
    } else if (layout.error() == std::errc::argument_list_too_long) {
      ++stats_.tx_frags_fallback;
    }
  }
  return TapRead::frame;
}

void ShimLoop::schedule_tx_retry() {
  if (tx_retry_armed_) return;
  tx_retry_armed_ = true;
  tx_retry_timer_.expires_after(kTxRetry);
  tx_retry_timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (gen != generation_ || stopping_) return;
    tx_retry_armed_ = false;
    if (ec) return;
    for (std::size_t i = 0; i < tap_queues_.size(); ++i) {
      if (!tap_queues_[i].pending_meta || tap_queues_[i].waiting) continue;
      nf_->process_tx_responses(tx_queue_for(i));
      on_tap_readable(i);
    }
  });
}

// --- guest RX: netfront -> TAP ---

void ShimLoop::arm_event(std::size_t q) {
  auto& eq = event_queues_[q];
  if (eq.waiting) return;
  eq.waiting = true;
  eq.desc->async_wait(Descriptor::wait_read,
                      [this, q, gen = generation_](const boost::system::error_code& ec) {
                        if (gen != generation_ || stopping_) return;
                        event_queues_[q].waiting = false;
                        if (!ec) on_event(q);
                      });
}

void ShimLoop::on_event(std::size_t q) {
  const QueueId qid{static_cast<std::uint32_t>(q)};
  (void)nf_->handle_event(qid);
  // TX responses freed slots: resume the TAP queues that were waiting for this queue.
  for (std::size_t i = 0; i < tap_queues_.size(); ++i) {
    if (tx_queue_for(i) == qid && tap_queues_[i].pending_meta && !tap_queues_[i].waiting)
      on_tap_readable(i);
  }
  rx_poll(q);
  arm_event(q);
}

void ShimLoop::refill_tokens() {
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::chrono::duration<double>(now - tokens_at_).count();
  tokens_at_ = now;
  tokens_ = std::min<double>(nf_opts_.rx_budget, tokens_ + dt * *opts_.rx_rate);
}

void ShimLoop::schedule_rx_timer() {
  if (rx_timer_armed_) return;
  rx_timer_armed_ = true;
  const double deficit = nf_opts_.rx_budget - tokens_;
  const auto wait = std::max<std::chrono::microseconds>(
      std::chrono::microseconds(static_cast<std::int64_t>(deficit * 1e6 / *opts_.rx_rate)), 100us);
  rx_timer_.expires_after(wait);
  rx_timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (gen != generation_ || stopping_) return;
    rx_timer_armed_ = false;
    if (ec) return;
    for (std::size_t q = 0; q < event_queues_.size(); ++q) rx_poll(q);
  });
}

void ShimLoop::rx_poll(std::size_t q) {
  auto& eq = event_queues_[q];
  if (opts_.rx_rate) {
    // The slow guest takes a budget's worth only when the bucket holds that many tokens;
    // until then the packets stay on the ring and the backend's queue backs up.
    refill_tokens();
    if (tokens_ < nf_opts_.rx_budget) {
      schedule_rx_timer();
      return;
    }
  }
  // Each packet goes from its RX pages to the TAP in one writev, before the refill.
  rx_writer_.set_fd(tap_fd(q % tap_queues_.size()));
  const std::size_t got = nf_->poll(rx_writer_, QueueId{static_cast<std::uint32_t>(q)});
  if (opts_.rx_rate) tokens_ -= static_cast<double>(got);
  stats_.tap_tx_frames = rx_writer_.written();
  stats_.tap_tx_dropped = rx_writer_.dropped();
  if (got >= nf_opts_.rx_budget && !eq.poll_posted) {
    // A full budget: more may be waiting. Poll again after the other handlers had a turn.
    eq.poll_posted = true;
    asio::post(io_, [this, q, gen = generation_] {
      if (gen != generation_ || stopping_) return;
      event_queues_[q].poll_posted = false;
      rx_poll(q);
    });
  }
}

}  // namespace unetback::shim
