#include "backend/daemon/service_notifier.hpp"

#include <cstdint>
#include <string>

#include "common/util/log.hpp"

#if UNETBACK_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace unetback::daemon {
namespace {

constexpr std::string_view kNotifierLog = "unetbackd";

/// sd_notify(3) with the environment left in place (the watchdog reads it again); a failure
/// is logged, never fatal: systemd then times the start out or kills us, which says more.
void notify(const std::string& state) {
#if UNETBACK_HAVE_LIBSYSTEMD
  if (const int rc = ::sd_notify(0, state.c_str()); rc < 0) {
    log::write(log::Level::warn, kNotifierLog,
               "sd_notify(" + state.substr(0, state.find('\n')) +
                   ") failed: " + std::system_category().message(-rc));
  }
#else
  (void)state;
#endif
}

}  // namespace

ServiceNotifier::ServiceNotifier(boost::asio::io_context& io) : timer_(io) {
#if UNETBACK_HAVE_LIBSYSTEMD
  std::uint64_t usec = 0;
  if (::sd_watchdog_enabled(0, &usec) > 0) watchdog_ = std::chrono::microseconds(usec);
#endif
}

ServiceNotifier::~ServiceNotifier() {
  boost::system::error_code ignored;
  timer_.cancel(ignored);  // the overload that reports instead of throwing
}

bool ServiceNotifier::enabled() {
#if UNETBACK_HAVE_LIBSYSTEMD
  return true;
#else
  return false;
#endif
}

void ServiceNotifier::ready(std::string_view status) {
  notify("READY=1\nSTATUS=" + std::string(status));
  stopped_ = false;  // ready again after a reload (an upgrade whose successor failed)
  if (watchdog_.count() > 0) {
    log::write(log::Level::info, kNotifierLog,
               "systemd watchdog: " + std::to_string(watchdog_.count() / 1000) +
                   " ms, fed every half of it from the manager loop");
    do_ping();
  }
}

void ServiceNotifier::stopping() {
  stopped_ = true;
  timer_.cancel();
  notify("STOPPING=1");
}

void ServiceNotifier::reloading(std::string_view status) {
  // The watchdog is still fed: this process serves until its successor takes over.
  notify("RELOADING=1\nSTATUS=" + std::string(status));
}

void ServiceNotifier::main_pid(pid_t pid) {
  stopped_ = true;
  timer_.cancel();
  notify("MAINPID=" + std::to_string(pid));
}

void ServiceNotifier::do_ping() {
  if (stopped_) return;
  notify("WATCHDOG=1");
  timer_.expires_after(watchdog_ / 2);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) do_ping();
  });
}

}  // namespace unetback::daemon
