#include <cstdio>
#include <deque>

#include "frontend-shim/shim_loop.hpp"
#include "frontend-shim/shim_loop_internal.hpp"

// The xenbus driver: the domain's watches, the events they and the deadlines and signals give,
// frontend_next() (frontend_state.hpp), and its actions carried out; suspend and resume.
namespace unetback::shim {

using namespace loop_detail;

namespace {

/// Feedback chains are short (Connect -> ConnectSucceeded, ...): this only bounds a bug.
constexpr int kMaxChainedEvents = 16;

}  // namespace

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

void ShimLoop::arm_connect_deadline() {
  deadline_timer_.expires_after(std::chrono::milliseconds(opts_.connect_timeout_ms));
  deadline_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    dispatch(ConnectDeadlineExpired{});
  });
}

void ShimLoop::report_connect_timeout() {
  const std::string what =
      view_.per_state_deadline && view_.backend
          ? "backend stayed in state " + std::string(xenbus::state_name(*view_.backend)) + " for " +
                std::to_string(opts_.connect_timeout_ms) + " ms"
          : "not connected within " + std::to_string(opts_.connect_timeout_ms) + " ms";
  error(what + " (backend " + (be_dir_.empty() ? fe_dir_ + "/backend" : be_dir_) +
        " never reached Connected)");
}

void ShimLoop::arm_xs_watch() {
  xs_desc_->async_wait(Descriptor::wait_read, [this](const boost::system::error_code& ec) {
    // While stopping, the watch still says when the backend has followed the close.
    if (ec || !xs_ || view_.phase == FrontendPhase::stopped) return;
    while (xs_->read_watch()) {
    }
    evaluate();
    // A suspended guest may have let its domain (and this connection) go in evaluate().
    if (xs_desc_ && view_.phase != FrontendPhase::stopped) arm_xs_watch();
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
  if (!xs_) return;  // suspended, the domain released
  if (opts_.resume_file && reopen_) {
    if (auto req = xs_->read(shutdown_path_); req && *req == "suspend") {
      dispatch(SuspendRequested{});
      if (!xs_) return;
    }
  }
  auto be = xs_->read(fe_dir_ + "/backend");
  if (!be && be.error() != std::errc::no_such_file_or_directory) {
    // Not "no such node": the store itself is unreachable (libxenstore reports its dead socket
    // as EINVAL/EPIPE...). Its watch fd stays readable forever, so looping would only spin.
    store_error_ = be.error();
    dispatch(XenstoreLost{});
    return;
  }
  if (!be) {
    // The toolstack removed the device: nothing to talk to until it adds it again.
    dispatch(VifRemoved{});
    return;
  }
  be_dir_ = *be;
  watch_backend(be_dir_);
  dispatch(BackendStateChanged{read_state(*xs_, be_dir_ + "/state")});
}

void ShimLoop::dispatch(const FrontendEvent& first) {
  std::deque<FrontendEvent> pending{first};
  for (int n = 0; !pending.empty() && n < kMaxChainedEvents; ++n) {
    const FrontendEvent event = pending.front();
    pending.pop_front();
    FrontendTransition t = frontend_next(view_, event);
    if (!t.actions.empty() || t.view != view_)
      log::write(log::Level::debug, kLog, describe(event) + " -> " + describe(t.view));
    view_ = t.view;
    for (const FrontendAction& a : t.actions) {
      // An outcome fed back ends the list (Connect is always last; a failed one drops the rest).
      if (auto feedback = execute(a)) {
        pending.push_back(*feedback);
        break;
      }
    }
  }
}

std::optional<FrontendEvent> ShimLoop::execute(const FrontendAction& action) {
  return std::visit(
      [&](const auto& a) -> std::optional<FrontendEvent> {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, WriteState>) {
          const std::string path = fe_dir_ + "/state";
          // Starting over: only while our state node is there (the toolstack may have removed
          // the device with it).
          if (a.state == XenbusState::initialising && !read_state(*xs_, path)) return std::nullopt;
          if (auto ec = xs_->write(path, xenbus::to_xs_string(a.state))) {
            warn("writing frontend state " + xenbus::to_xs_string(a.state) + ": " + ec.message());
          }
        } else if constexpr (std::is_same_v<T, Connect>) {
          return connect_now();
        } else if constexpr (std::is_same_v<T, AnnounceConnected>) {
          if (rules_.mcast_extras) sync_mcast();
          if (opts_.xdp_headroom_file) arm_xdp_timer();
          configure_rss();
        } else if constexpr (std::is_same_v<T, BeginClose>) {
          begin_close(a.reason);
        } else if constexpr (std::is_same_v<T, FinishClose>) {
          finish_close(a.backend_followed);
        } else if constexpr (std::is_same_v<T, ArmCloseDeadline>) {
          close_timer_.expires_after(kDisconnectWait);
          close_timer_.async_wait([this](const boost::system::error_code& ec) {
            if (ec || view_.phase != FrontendPhase::closing) return;
            dispatch(CloseDeadlineExpired{});
            // Look again, as after a close the watch ended: the backend may be in InitWait.
            if (view_.phase != FrontendPhase::stopped) evaluate();
          });
        } else if constexpr (std::is_same_v<T, CancelCloseDeadline>) {
          close_timer_.cancel();
        } else if constexpr (std::is_same_v<T, ArmConnectDeadline>) {
          arm_connect_deadline();
        } else if constexpr (std::is_same_v<T, CancelConnectDeadline>) {
          deadline_timer_.cancel();
        } else if constexpr (std::is_same_v<T, ReportConnectTimeout>) {
          report_connect_timeout();
        } else if constexpr (std::is_same_v<T, AcknowledgeSuspend>) {
          return acknowledge_suspend();
        } else if constexpr (std::is_same_v<T, StopDataPath>) {
          stop_data_path();
        } else if constexpr (std::is_same_v<T, ReleaseDomain>) {
          if (hv_) {
            const DomId old = hv_->self();
            let_domain_go();
            info("suspended: domain " + std::to_string(old.value()) +
                 " released, waiting for SIGUSR1");
          }
        } else if constexpr (std::is_same_v<T, OpenDomain>) {
          return reopen_domain(a.domid);
        } else if constexpr (std::is_same_v<T, BeginReconfiguration>) {
          if (auto ec = nf_->begin_xdp_headroom_change(a.headroom)) {
            warn("reconfiguring the XDP headroom: " + ec.message());
            return ReconfigureFailed{};
          }
          info("Reconfiguring: xdp-headroom " + std::to_string(a.headroom));
          xdp_change_since_ = std::chrono::steady_clock::now();
        } else if constexpr (std::is_same_v<T, EndReconfiguration>) {
          end_reconfiguration(a.answered);
        } else if constexpr (std::is_same_v<T, BeginStop>) {
          if (a.code == kExitXenstoreLost)
            error("xenstore: " + store_error_.message() + ": the store is gone, stopping");
          stopping_ = true;
          exit_code_ = a.code;
          signals_.cancel();
          resume_signal_.cancel();
        } else if constexpr (std::is_same_v<T, Exit>) {
          exit_code_ = a.code;
          io_.stop();
        }
        return std::nullopt;
      },
      action);
}

void ShimLoop::teardown(std::chrono::milliseconds wait_for_backend) {
  stop_data_path();
  close_timer_.cancel();
  if (nf_) nf_->disconnect(wait_for_backend);
}

void ShimLoop::begin_close(CloseReason reason) {
  switch (reason) {
    case CloseReason::backend_closed:
      // netfront: the backend Closing/Closed closes the frontend.
      info("backend state " + state_text(view_.backend) + ": disconnecting");
      break;
    case CloseReason::backend_restarted: info("backend went back to InitWait: reconnecting"); break;
    case CloseReason::vif_removed: info("the vif was removed: disconnecting"); break;
    case CloseReason::stopping: break;
  }
  stop_data_path();
  if (nf_) nf_->begin_disconnect();
}

void ShimLoop::finish_close(bool backend_followed) {
  if (!backend_followed) {
    warn("the backend did not follow the close within " + std::to_string(kDisconnectWait.count()) +
         " ms: closing anyway");
  }
  close_timer_.cancel();
  if (nf_) nf_->finish_disconnect();
}

std::optional<FrontendEvent> ShimLoop::acknowledge_suspend() {
  // xen/manage.c: the request is acknowledged by writing "" back; then the domain suspends.
  if (auto ec = xs_->write(shutdown_path_, "")) {
    warn("acknowledging the suspend request: " + ec.message());
    return std::nullopt;
  }
  info("suspend requested: the data path stops; the backend is told nothing");
  ++stats_.suspends;
  return SuspendAcknowledged{};
}

void ShimLoop::let_domain_go() {
  // The descriptor never owns the watch fd (release() takes it out of the reactor).
  if (xs_desc_) (void)xs_desc_->release();
  xs_desc_.reset();
  if (nf_) nf_->drop_rings();
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
  if (view_.phase != FrontendPhase::suspended && view_.phase != FrontendPhase::detached) {
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
  dispatch(ResumeRequested{*domid});
  if (xs_ && view_.phase != FrontendPhase::stopped) evaluate();
}

std::optional<FrontendEvent> ShimLoop::reopen_domain(std::uint16_t domid) {
  try {
    hv_ = reopen_(DomId{domid});
  } catch (const SetupError& e) {
    error("resume as domain " + std::to_string(domid) + ": " + e.what());
    return OpenFailed{};
  }
  if (!open_domain()) return OpenFailed{};
  garp_pending_ = true;
  ++stats_.resumes;
  info("resumed as domain " + std::to_string(domid) + ": connecting " + fe_dir_);
  return DomainOpened{read_state(*xs_, fe_dir_ + "/state")};
}

}  // namespace unetback::shim
