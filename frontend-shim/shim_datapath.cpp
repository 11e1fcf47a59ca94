#include <algorithm>
#include <array>
#include <cerrno>
#include <sys/uio.h>
#include <unistd.h>

#include "common/net/flow_hash.hpp"
#include "common/net/frame.hpp"
#include "frontend-shim/guest_netdev.hpp"
#include "frontend-shim/shim_loop.hpp"
#include "frontend-shim/shim_loop_internal.hpp"

// The data path: connect (rings and the guest TAP), guest TX (TAP -> netfront), guest RX
// (netfront -> TAP), the event channels.
namespace unetback::shim {

using namespace loop_detail;

namespace {

namespace asio = boost::asio;

/// Frames read from one TAP queue before yielding to the other handlers.
constexpr int kTapBatch = 64;
/// A TSO super-frame is at most 64 KiB plus its Ethernet/VLAN header, behind the vnet header.
constexpr std::size_t kTapBufferLen = net::kVnetHdrLen + 65535 + 18 + 64;
/// While a TAP queue waits for TX slots, TX responses are also polled this often, in case a
/// notification is suppressed or lost (the event is the fast path, this the safety net).
constexpr auto kTxRetry = 1ms;

}  // namespace

FrontendEvent ShimLoop::connect_now() {
  // The machine has seen InitWait: connect() only looks again, it does not wait.
  if (auto ec = nf_->connect(0ms)) {
    warn("connect: " + ec.message() + " (will retry when the backend state changes)");
    return ConnectFailed{};
  }
  negotiated_ = negotiate_tx(nf_opts_, nf_->backend_features());
  if (!tap_) {
    if (!setup_tap()) return TapSetupFailed{};
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
  return ConnectSucceeded{};
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
  if (nf_ && nf_->connected())
    nf_totals_ += nf_->stats();  // the queues (and their counters) go with the connection
}

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
