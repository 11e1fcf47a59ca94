// ShimLoop: the netfront-shim's event loop (Boost.Asio, one thread). It owns the Netfront
// and the guest TAP and moves frames between them:
//
//  * TAP readable -> read one frame with its virtio_net_hdr (readv straight into a TxBuffer's
//    granted pages) -> TxMeta -> Netfront::send.
//    When send says busy (netfront stops below 19 free slots, xen-netfront.c) the frame is
//    kept and that TAP queue is not read again until TX responses free slots: the guest
//    kernel's qdisc then holds the backlog, as it does behind a stopped netfront queue.
//  * Event channel readable -> handle_event (TX responses) -> poll RX -> write each packet
//    from its RX pages to the TAP (one writev with a virtio_net_hdr built from its flags)
//    before the pages are posted again (TapRxWriter). With --rx-rate the polls are
//    paced by a token bucket, so the backend's RX queue backs up (a slow guest).
//  * Watches the backend's state and drives the xenbus protocol through the pure machine of
//    frontend_state.hpp (shim_xenbus.cpp): every watch event, deadline, signal and side-channel
//    request becomes a FrontendEvent, frontend_next() decides, the loop carries the actions
//    out. Closing/Closed -> disconnect (5, revoke, 6) and say Initialising (1) once the
//    backend is Closed; InitWait (2) -> connect again. No handler blocks on the backend: a
//    close says Closing (5) and finishes (revoke, 6) when the watch shows the backend Closing
//    too, or after 2 s.
//  * With --resume-file, control/shutdown=suspend (unetback-xl save/migrate) -> acknowledge
//    (""), stop the data path and say nothing to the backend (a suspended domain does not
//    run); once the toolstack has removed the vif, drop the rings and let the domain go.
//    SIGUSR1 -> claim the domain named in the resume file and connect its vif afresh, as
//    Linux's netfront_resume + talk_to_netback do; a gratuitous ARP once Connected. The TAP
//    (the guest's netdev) stays throughout, so the guest's connections survive.
//  * SIGTERM/SIGINT -> disconnect cleanly and stop.
//
// The member functions live in four files by concern: shim_loop.cpp (construction, run),
// shim_xenbus.cpp (the xenbus driver: watch, events, actions, suspend/resume),
// shim_datapath.cpp (connect, TAP, TX, RX, events) and shim_side_channels.cpp (RSS, the
// multicast list, the XDP headroom file, the ready line).
#pragma once

// clang-format off
#include <utility>  // before Boost.Asio (environment.md)
#include <boost/asio.hpp>
// clang-format on
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/hv/hypervisor.hpp"
#include "common/net/tap_device.hpp"
#include "common/util/unique_fd.hpp"
#include "frontend-shim/ctrl_runner.hpp"
#include "frontend-shim/frontend_mode.hpp"
#include "frontend-shim/frontend_state.hpp"
#include "frontend-shim/mcast_list.hpp"
#include "frontend-shim/netfront.hpp"
#include "frontend-shim/shim_offload.hpp"
#include "frontend-shim/shim_options.hpp"
#include "frontend-shim/tap_rx_writer.hpp"
#include "frontend-shim/tx_frag_layout.hpp"

namespace unetback::shim {

/// Counters of the shim's own work (the Netfront has its own).
struct ShimStats {
  std::uint64_t tap_rx_frames = 0;   ///< frames read from the TAP (guest TX)
  std::uint64_t tap_rx_dropped = 0;  ///< unmappable or refused by Netfront::send
  std::uint64_t tx_busy_stalls = 0;  ///< times a TAP queue paused on a busy netfront queue
  std::uint64_t tap_tx_frames = 0;   ///< packets written to the TAP (guest RX)
  std::uint64_t tap_tx_dropped = 0;  ///< bad offload metadata or a failed TAP write
  std::uint64_t reconnects = 0;
  std::uint64_t suspends = 0, resumes = 0;  ///< control/shutdown=suspend honoured; SIGUSR1 resumes
  std::uint64_t gratuitous_arps = 0;        ///< sent once Connected after a resume
  std::uint64_t tx_frags = 0;               ///< frames sent as --tx-frags slot chains
  std::uint64_t tx_frags_fallback = 0;      ///< frames that needed > 18 slots: normal layout
  std::uint64_t tx_hash_extras = 0;         ///< --mode xenvif: frames sent with a HASH extra
  std::uint64_t mcast_added = 0, mcast_removed = 0;  ///< MCAST_ADD / MCAST_DEL extras sent
  std::uint64_t xdp_reconfigurations = 0;      ///< headroom changes the backend answered with 8
  std::uint64_t xdp_reconfigure_timeouts = 0;  ///< ... or never answered (5 s)
};

/// Opens the hypervisor as (frontend of) another domain: a resumed guest's new domid.
using HypervisorOpener = std::function<std::unique_ptr<hv::Hypervisor>(DomId)>;

class ShimLoop {
 public:
  /// `hv` is the guest's hypervisor handle (frontend role); `reopen` claims the domain a
  /// resume names (may be empty: then no suspend is honoured); `ready_out` gets the ready
  /// line.
  ShimLoop(std::unique_ptr<hv::Hypervisor> hv, HypervisorOpener reopen, ShimOptions opts,
           std::ostream& ready_out);
  ~ShimLoop();
  ShimLoop(const ShimLoop&) = delete;
  ShimLoop& operator=(const ShimLoop&) = delete;

  /// Runs until SIGTERM/SIGINT (kExitClean) or a setup failure (kExitSetupFailure).
  int run();

  [[nodiscard]] const ShimStats& stats() const { return stats_; }

 private:
  using Descriptor = boost::asio::posix::stream_descriptor;

  struct TapQueue {
    std::unique_ptr<Descriptor> desc;
    std::vector<std::byte> buf;
    std::size_t pending_len = 0;     ///< a frame in `buf` (incl. vnet header) waiting for TX slots
    netfront::TxBuffer pending_buf;  ///< or a frame read into granted pages, waiting
    std::optional<netfront::TxMeta> pending_meta;
    std::optional<TxFragLayout> pending_frags;  ///< --tx-frags: the pending frame's chain
    bool waiting = false;                       ///< an async_wait is outstanding
  };
  struct EventQueue {
    std::unique_ptr<Descriptor> desc;
    bool waiting = false;
    bool poll_posted = false;
  };

  /// Reads what the watch may have changed (control/shutdown, the vif's backend and its
  /// state) and feeds it to the machine as one event (two with a suspend request).
  void evaluate();
  /// Runs the machine on `event` and carries its actions out in order; an action's outcome
  /// fed back as an event ends that list and runs the machine again.
  void dispatch(const FrontendEvent& event);
  std::optional<FrontendEvent> execute(const FrontendAction& action);
  /// The domain's xenstore connection, Netfront and watches (at start and at every resume).
  /// False (logged) when the domain has no vif `devid` or a watch cannot be set.
  bool open_domain();
  /// OpenDomain: claim domain `domid` (a resume) and open it.
  std::optional<FrontendEvent> reopen_domain(std::uint16_t domid);
  /// AcknowledgeSuspend: control/shutdown="" (xen/manage.c).
  std::optional<FrontendEvent> acknowledge_suspend();
  /// Drops the rings (no word to xenstore), the xenstore connection and the hypervisor
  /// handle: the domain dies with its broker connection.
  void let_domain_go();
  void arm_resume_signal();
  /// SIGUSR1: read the resume file and, when it names another domain, ResumeRequested.
  void resume();
  void send_gratuitous_arp();
  void watch_backend(const std::string& be_dir);
  void arm_xs_watch();
  /// Connect: ConnectSucceeded, ConnectFailed or TapSetupFailed.
  FrontendEvent connect_now();
  bool setup_tap();
  void attach_data_path();
  /// The data path's handlers and descriptors go (a generation bump); the rings stay.
  void stop_data_path();
  /// Blocking, outside the handlers only: stop_data_path() and Netfront::disconnect(wait).
  void teardown(std::chrono::milliseconds wait_for_backend);
  /// BeginClose: the data path stops and the frontend says Closing (5). FinishClose follows
  /// once the backend's state reads Closing or later (on the watch) or after kDisconnectWait
  /// (ArmCloseDeadline). Nothing blocks.
  void begin_close(CloseReason reason);
  /// FinishClose: the ports unbound, the grants revoked, Closed (6).
  void finish_close(bool backend_followed);
  /// EndReconfiguration: Connected (4) again.
  void end_reconfiguration(bool answered);

  void arm_tap(std::size_t i);
  void on_tap_readable(std::size_t i);
  enum class TapRead : std::uint8_t { frame, dropped, again };
  /// Reads one frame from TAP queue `i` into its pending slot (meta set) or drops it.
  TapRead read_tap_frame(std::size_t i, QueueId q);
  [[nodiscard]] QueueId tx_queue_for(std::size_t tap_index) const;
  [[nodiscard]] int tap_fd(std::size_t i) const;
  void arm_event(std::size_t q);
  void on_event(std::size_t q);
  void rx_poll(std::size_t q);
  void refill_tokens();
  void schedule_rx_timer();
  void schedule_tx_retry();
  /// --rss: win-xenvif's control-ring sequence, once the backend is Connected, run by
  /// ctrl_runner_ (nothing waits); then (or at once without --rss) announce_ready().
  void configure_rss();
  /// The ready line (the first time) or "reconnected", and the gratuitous ARP of a resume:
  /// once the RSS sequence has ended, so whoever waits for "ready" sees the hash configured.
  void announce_ready();
  /// --rss-mapping-file: the file's table if its text changed since the last look.
  std::optional<std::vector<std::uint32_t>> read_rss_file();
  void arm_rss_timer();
  /// The connect deadline: the whole connect, or (per_state_wait) each backend state.
  void arm_connect_deadline();
  void report_connect_timeout();
  /// --mode xenvif: the TAP's multicast list to the backend as MCAST_ADD/DEL extras.
  void sync_mcast();
  void arm_mcast_timer();
  /// The --tx-frags piece size in use: the option, or the mode's chains (with SG only).
  [[nodiscard]] std::optional<std::uint32_t> tx_frag_size() const;
  /// --mode xenvif: a HASH extra for the frame whose headers are in `head`.
  void add_tx_hash(netfront::TxMeta& meta, std::span<const std::byte> head);
  /// --xdp-headroom-file: its value, or nothing (unreadable or bad: logged once per text).
  std::optional<std::uint32_t> read_xdp_file();
  /// Every 200 ms while connected: a new value in the file asks for a reconfiguration (7,
  /// key; XdpHeadroomRequested); the machine ends it (4) when the backend says Reconfigured
  /// (8), or when the file's poll finds it older than 5 s (ReconfigureDeadlineExpired).
  void arm_xdp_timer();

  std::unique_ptr<hv::Hypervisor> hv_;  ///< null while suspended with the domain released
  HypervisorOpener reopen_;
  ShimOptions opts_;
  std::ostream& ready_out_;
  netfront::NetfrontOptions nf_opts_;
  // Run by one thread only: concurrency hint 1 lets handlers post to a thread-private queue
  // instead of waking the reactor (an epoll_ctl) for every continuation.
  boost::asio::io_context io_{1};
  boost::asio::signal_set signals_, resume_signal_;
  ModeRules rules_;
  boost::asio::steady_timer deadline_timer_, rx_timer_, tx_retry_timer_, rss_timer_, mcast_timer_,
      xdp_timer_, close_timer_;
  CtrlRunner ctrl_runner_;  ///< --rss: the control ring's requests (cancelled with the data path)
  FrontendView view_;       ///< the xenbus machine's view (frontend_state.hpp)
  std::error_code store_error_;         ///< why the store is gone (XenstoreLost)
  std::vector<McastAddr> mcast_known_;  ///< the groups the backend was told about
  std::string rss_file_text_;           ///< the mapping file as last read
  std::string xdp_file_text_;           ///< the headroom file as last read
  /// Since when a reconfiguration waits for the backend's Reconfigured.
  std::optional<std::chrono::steady_clock::time_point> xdp_change_since_;
  std::optional<std::uint32_t> xdp_unoffered_;  ///< a value already refused for lack of the feature
  std::unique_ptr<hv::XenStore> xs_;
  std::unique_ptr<Descriptor> xs_desc_;
  std::unique_ptr<netfront::Netfront> nf_;
  std::string fe_dir_, be_dir_, watched_be_state_;
  std::string shutdown_path_;  ///< /local/domain/<self>/control/shutdown
  bool garp_pending_ = false;
  std::optional<net::TapDevice> tap_;
  net::MacAddress guest_mac_{};  ///< the TAP's (the vif's mac at the first connect)
  std::vector<UniqueFd> extra_tap_fds_;
  std::vector<TapQueue> tap_queues_;
  std::vector<EventQueue> event_queues_;
  TapRxWriter rx_writer_;  ///< guest RX: from the RX pages to the TAP
  NegotiatedTx negotiated_{};
  std::uint64_t generation_ = 0;  ///< bumped at every teardown: stale handlers do nothing
  bool ready_said_ = false;       ///< the ready line is out
  bool rx_timer_armed_ = false, tx_retry_armed_ = false;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point tokens_at_{};
  int exit_code_ = kExitClean;
  bool stopping_ = false;  ///< BeginStop: the data path's handlers do nothing more
  ShimStats stats_;
  netfront::NetfrontStats nf_totals_;  ///< summed over past connections
};

}  // namespace unetback::shim
