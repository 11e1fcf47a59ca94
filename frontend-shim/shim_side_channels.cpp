#include <algorithm>

#include "frontend-shim/shim_loop.hpp"
#include "frontend-shim/shim_loop_internal.hpp"

// The side channels of a connection: RSS through the control ring (and its mapping file), the
// ready line, the multicast list (--mode xenvif) and the XDP headroom file.
namespace unetback::shim {

using namespace loop_detail;

namespace {

constexpr auto kRssFilePoll = 200ms;
/// How often --mode xenvif looks at the guest's multicast list.
constexpr auto kMcastPoll = 200ms;
constexpr auto kXdpFilePoll = 200ms;
/// How long a reconfiguration waits for the backend's Reconfigured (Linux netfront waits
/// forever; a test tool would rather say so and go back to Connected).
constexpr auto kXdpReconfigureWait = 5s;

}  // namespace

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
    if (view_.phase == FrontendPhase::reconfiguring) {
      if (xdp_change_since_ &&
          std::chrono::steady_clock::now() - *xdp_change_since_ >= kXdpReconfigureWait)
        dispatch(ReconfigureDeadlineExpired{});
    } else if (auto want = read_xdp_file(); want && *want != nf_->xdp_headroom()) {
      if (!nf_->backend_features().xdp_headroom) {
        if (xdp_unoffered_ != want) {
          warn("the backend offers no feature-xdp-headroom: headroom " + std::to_string(*want) +
               " not asked for");
        }
        xdp_unoffered_ = want;
      } else {
        dispatch(XdpHeadroomRequested{*want});
      }
    }
    if (gen == generation_) arm_xdp_timer();
  });
}

void ShimLoop::end_reconfiguration(bool answered) {
  xdp_change_since_.reset();
  if (!answered) {
    warn("the backend never said Reconfigured: Connected again");
    ++stats_.xdp_reconfigure_timeouts;
    if (auto e = nf_->end_xdp_headroom_change()) warn("writing frontend state 4: " + e.message());
    return;
  }
  if (auto ec = nf_->end_xdp_headroom_change()) {
    warn("writing frontend state 4: " + ec.message());
    return;
  }
  ++stats_.xdp_reconfigurations;
  info("backend Reconfigured: guest RX with " + std::to_string(nf_->xdp_headroom()) +
       " bytes of XDP headroom, Connected again");
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

}  // namespace unetback::shim
