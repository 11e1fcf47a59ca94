#include "common/hv/xen/xen_event_channel.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

extern "C" {
#include <xenevtchn.h>
}

#include "common/hv/xen/evtchn_device.hpp"
#include "common/hv/xen/xen_open_error.hpp"
#include "common/hv/xen/xen_tool_logger.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

std::error_code status_of(int rc) {
  return rc == 0 ? std::error_code{} : library_call_error();
}

Result<Port> port_of(xenevtchn_port_or_error_t rc) {
  if (rc < 0) return library_call_error();
  return Port{static_cast<std::uint32_t>(rc)};
}

/// The kernel's evtchn device reads and writes at most a page of ports per call.
constexpr std::size_t kMaxPortsPerCall = 4096 / sizeof(std::uint32_t);

/// One port per syscall, as libxenevtchn does (UNETBACK_NO_EVTCHN_BATCH=1: an operator's way
/// back, and the A/B of the batching in the real-Xen lab).
bool evtchn_batch_wanted() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the daemon never changes its environment.
  static const bool wanted = std::getenv("UNETBACK_NO_EVTCHN_BATCH") == nullptr;
  return wanted;
}

}  // namespace

Result<std::size_t> read_pending_ports(int fd, std::span<Port> out) {
  // A short read does not mean the device's ring is empty. Linux's evtchn driver wakes a
  // reader (and so makes an edge for epoll) only when a port lands in an empty ring, and it
  // advances the ring's consumer after copying: a port that lands while a read copies finds
  // the ring not empty and wakes nobody. A caller that took the short read for "none left"
  // and waited for the next edge would wait for ever, the port masked in the ring, its
  // ring served only by timers. So read on until the device says EAGAIN (or out is full):
  // a short batch then really means none is left, as pending_batch promises.
  std::array<std::uint32_t, 64> raw{};
  const std::size_t want = std::min({out.size(), raw.size(), kMaxPortsPerCall});
  std::size_t n = 0;
  while (n < want) {
    ssize_t got;
    do {
      got = ::read(fd, raw.data(), (want - n) * sizeof(std::uint32_t));
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (n > 0) break;  // the ports taken are reported; the error comes again next time
      return last_errno();
    }
    const auto k = static_cast<std::size_t>(got) / sizeof(std::uint32_t);
    if (k == 0) break;
    for (std::size_t i = 0; i < k; ++i) out[n + i] = Port{raw[i]};
    n += k;
  }
  return n;
}

std::error_code write_unmask_ports(int fd, std::span<const Port> ports) {
  std::array<std::uint32_t, 64> raw{};
  for (std::size_t done = 0; done < ports.size();) {
    const std::size_t n = std::min({ports.size() - done, raw.size(), kMaxPortsPerCall});
    for (std::size_t i = 0; i < n; ++i) raw[i] = ports[done + i].value();
    ssize_t put;
    do {
      put = ::write(fd, raw.data(), n * sizeof(std::uint32_t));
    } while (put < 0 && errno == EINTR);
    if (put < 0) return last_errno();
    if (static_cast<std::size_t>(put) != n * sizeof(std::uint32_t)) return errno_code(EIO);
    done += n;
  }
  return {};
}

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
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw SetupError("event channel: cannot make /dev/xen/evtchn non-blocking: " +
                     last_errno().message());
  }
}

XenEventChannel::~XenEventChannel() = default;

std::error_code XenEventChannel::restrict_to(DomId domid) {
  if (xenevtchn_restrict(handle_.get(), domid.value()) != 0) return last_errno();
  return {};
}

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
  return library_call_error();
}

std::error_code XenEventChannel::unmask(Port local) {
  errno = 0;
  return status_of(xenevtchn_unmask(handle_.get(), local.value()));
}

Result<std::size_t> XenEventChannel::pending_batch(std::span<Port> out) {
  if (!evtchn_batch_wanted()) return EventChannel::pending_batch(out);
  return read_pending_ports(fd(), out);
}

std::error_code XenEventChannel::unmask_batch(std::span<const Port> ports) {
  if (!evtchn_batch_wanted()) return EventChannel::unmask_batch(ports);
  return write_unmask_ports(fd(), ports);
}

std::error_code XenEventChannel::unbind(Port local) {
  errno = 0;
  return status_of(xenevtchn_unbind(handle_.get(), local.value()));
}

}  // namespace unetback::hv
