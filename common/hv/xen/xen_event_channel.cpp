#include "common/hv/xen/xen_event_channel.hpp"

#include <cerrno>
#include <cstdint>
#include <fcntl.h>

extern "C" {
#include <xenevtchn.h>
}

#include "common/hv/xen/xen_open_error.hpp"
#include "common/hv/xen/xen_tool_logger.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

/// The errno of a failed libxenevtchn call (EIO should a library path forget to set it).
std::error_code call_error() {
  return errno != 0 ? last_errno() : errno_code(EIO);
}

std::error_code status_of(int rc) {
  return rc == 0 ? std::error_code{} : call_error();
}

Result<Port> port_of(xenevtchn_port_or_error_t rc) {
  if (rc < 0) return call_error();
  return Port{static_cast<std::uint32_t>(rc)};
}

}  // namespace

void XenEventChannel::Closer::operator()(xenevtchn_handle* h) const noexcept {
  (void)xenevtchn_close(h);
}

XenEventChannel::XenEventChannel() : handle_(xenevtchn_open(xen_tool_logger(), 0)) {
  if (!handle_) {
    const int err = errno;
    throw SetupError(xen_open_error("event channel", "/dev/xen/evtchn", err), errno_code(err));
  }
  const int fd = xenevtchn_fd(handle_.get());
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw SetupError("event channel: cannot make /dev/xen/evtchn non-blocking: " +
                     last_errno().message());
}

XenEventChannel::~XenEventChannel() = default;

int XenEventChannel::fd() const {
  return xenevtchn_fd(handle_.get());
}

Result<Port> XenEventChannel::bind_unbound(DomId remote) {
  errno = 0;
  return port_of(xenevtchn_bind_unbound_port(handle_.get(), remote.value()));
}

Result<Port> XenEventChannel::bind_interdomain(DomId remote, Port remote_port) {
  errno = 0;
  return port_of(xenevtchn_bind_interdomain(handle_.get(), remote.value(), remote_port.value()));
}

std::error_code XenEventChannel::notify(Port local) {
  errno = 0;
  return status_of(xenevtchn_notify(handle_.get(), local.value()));
}

Result<std::optional<Port>> XenEventChannel::pending() {
  errno = 0;
  const xenevtchn_port_or_error_t rc = xenevtchn_pending(handle_.get());
  if (rc >= 0) return std::optional<Port>(Port{static_cast<std::uint32_t>(rc)});
  // The fd is non-blocking: EAGAIN is the empty queue, not an error.
  if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<Port>();
  return call_error();
}

std::error_code XenEventChannel::unmask(Port local) {
  errno = 0;
  return status_of(xenevtchn_unmask(handle_.get(), local.value()));
}

std::error_code XenEventChannel::unbind(Port local) {
  errno = 0;
  return status_of(xenevtchn_unbind(handle_.get(), local.value()));
}

}  // namespace unetback::hv
