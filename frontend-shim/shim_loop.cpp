#include "frontend-shim/shim_loop.hpp"

#include <algorithm>
#include <csignal>

#include "frontend-shim/shim_loop_internal.hpp"

namespace unetback::shim {

using namespace loop_detail;

namespace {

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
    dispatch(StopRequested{kExitClean});
  });
  view_.per_state_deadline = rules_.per_state_wait;
  dispatch(DomainOpened{read_state(*xs_, fe_dir_ + "/state")});
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

}  // namespace unetback::shim
