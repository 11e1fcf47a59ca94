// XenEventChannel: EventChannel over libxenevtchn (/dev/xen/evtchn).
//
// The fd is set O_NONBLOCK: the caller waits for readability (Asio async_wait) and then
// drains pending() until it returns nullopt, so pending() must fail with EAGAIN rather
// than block once the queue is empty. (xenevtchn.h warns that very old kernels, e.g. Linux
// 3.12, may still block on a non-blocking fd; waiting for readability first keeps us
// correct there as long as only one thread reads the handle.)
#pragma once

#include <memory>
#include <optional>

#include "common/hv/event_channel.hpp"

struct xenevtchn_handle;

namespace unetback::hv {

class XenEventChannel final : public EventChannel {
 public:
  /// Opens /dev/xen/evtchn; throws SetupError naming it when that fails.
  XenEventChannel();
  /// Closes the handle; the kernel unbinds any port still bound.
  ~XenEventChannel() override;
  XenEventChannel(const XenEventChannel&) = delete;
  XenEventChannel& operator=(const XenEventChannel&) = delete;

  [[nodiscard]] int fd() const override;
  Result<Port> bind_unbound(DomId remote) override;
  Result<Port> bind_interdomain(DomId remote, Port remote_port) override;
  std::error_code notify(Port local) override;
  Result<std::optional<Port>> pending() override;
  std::error_code unmask(Port local) override;
  std::error_code unbind(Port local) override;
  /// One read() of /dev/xen/evtchn for every pending port (evtchn_device.hpp).
  Result<std::size_t> pending_batch(std::span<Port> out) override;
  /// One write() for all of them.
  std::error_code unmask_batch(std::span<const Port> ports) override;
  /// IOCTL_EVTCHN_RESTRICT_DOMID (xenevtchn_restrict): from now on this handle binds only to
  /// `domid`; the ports bound already keep working. Once per handle.
  std::error_code restrict_to(DomId domid);

 private:
  struct Closer {
    void operator()(xenevtchn_handle* h) const noexcept;
  };
  std::unique_ptr<xenevtchn_handle, Closer> handle_;
};

}  // namespace unetback::hv
