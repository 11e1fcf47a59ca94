#include "frontend-shim/ctrl_runner.hpp"

#include <string>

#include "common/util/log.hpp"

namespace unetback::shim {

namespace {
constexpr std::string_view kLog = "netfront-ctrl";
}  // namespace

CtrlRunner::CtrlRunner(boost::asio::any_io_executor ex) : ex_(std::move(ex)), deadline_(ex_) {}

CtrlRunner::~CtrlRunner() {
  try {
    cancel();
  } catch (...) {
    // A timer's cancel may throw in theory; nothing to tell anyone from a destructor.
  }
}

std::error_code CtrlRunner::start(netfront::CtrlClient& client,
                                  std::vector<netfront::CtrlStep> steps, Done done,
                                  std::chrono::milliseconds timeout) {
  if (busy()) return std::make_error_code(std::errc::device_or_resource_busy);
  client_ = &client;
  steps_ = std::move(steps);
  current_ = 0;
  timeout_ = timeout;
  done_ = std::move(done);
  desc_.emplace(ex_, client.event_fd());
  waiting_ = false;
  boost::asio::post(ex_, [this, serial = serial_] {
    if (serial == serial_) send_current();
  });
  return {};
}

void CtrlRunner::cancel() {
  if (!busy()) return;
  client_->abandon();
  ++serial_;
  client_ = nullptr;
  done_ = nullptr;
  deadline_.cancel();
  // The descriptor never owns the fd (release() also cancels the wait).
  if (desc_) (void)desc_->release();
  desc_.reset();
  waiting_ = false;
}

void CtrlRunner::send_current() {
  if (current_ == steps_.size()) {
    finish({});
    return;
  }
  const auto& step = steps_[current_];
  if (auto ec = client_->send(step)) {
    log::write(log::Level::warn, kLog, std::string(step.name) + ": " + ec.message());
    finish(ec);
    return;
  }
  ++request_;
  deadline_.expires_after(timeout_);
  deadline_.async_wait(
      [this, serial = serial_, request = request_](const boost::system::error_code& ec) {
        // An expiry already queued when the answer came belongs to the previous request.
        if (ec || serial != serial_ || request != request_) return;
        log::write(log::Level::warn, kLog,
                   std::string(steps_[current_].name) + ": no answer from the backend within " +
                       std::to_string(timeout_.count()) + " ms: given up");
        finish(std::make_error_code(std::errc::timed_out));
      });
  check();
}

void CtrlRunner::check() {
  auto rsp = client_->take_response();
  if (!rsp) {
    arm_event();
    return;
  }
  const auto& step = steps_[current_];
  if (!*rsp) {
    log::write(log::Level::warn, kLog, std::string(step.name) + ": " + rsp->error().message());
    finish(rsp->error());
    return;
  }
  if ((*rsp)->status != XEN_NETIF_CTRL_STATUS_SUCCESS) {
    log::write(
        log::Level::warn, kLog,
        std::string(step.name) + ": backend answered status " + std::to_string((*rsp)->status));
    finish(std::make_error_code(std::errc::invalid_argument));
    return;
  }
  deadline_.cancel();
  ++current_;
  send_current();
}

void CtrlRunner::arm_event() {
  if (waiting_) return;
  waiting_ = true;
  desc_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                    [this, serial = serial_](const boost::system::error_code& ec) {
                      if (serial != serial_) return;
                      waiting_ = false;
                      if (!ec) check();
                    });
}

void CtrlRunner::finish(std::error_code ec) {
  Done done = std::move(done_);
  cancel();
  if (done) done(ec);
}

}  // namespace unetback::shim
