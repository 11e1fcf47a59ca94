// EventChannel: one handle on the event-channel device (libxenevtchn's role). A handle owns
// any number of ports; its fd becomes readable when one of them has an event pending.
//
// Delivery follows Xen: pending() returns a port and leaves it masked; the caller handles
// the event and then calls unmask(port), which re-arms it (an event raised while masked is
// delivered right after the unmask).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hv {

class EventChannel {
 public:
  virtual ~EventChannel() = default;

  /// Pollable (e.g. by boost::asio::posix::stream_descriptor::async_wait): readable when
  /// pending() has a port to report.
  [[nodiscard]] virtual int fd() const = 0;

  /// Allocates a local port that domain `remote` may bind to (EVTCHNOP_alloc_unbound).
  virtual Result<Port> bind_unbound(DomId remote) = 0;
  /// Connects a new local port to `remote_port` of `remote`, which must have been
  /// allocated unbound for us (EVTCHNOP_bind_interdomain).
  virtual Result<Port> bind_interdomain(DomId remote, Port remote_port) = 0;
  /// Raises an event on the peer of `local`.
  virtual std::error_code notify(Port local) = 0;
  /// The next port with an event (now masked), or nullopt when nothing is pending.
  virtual Result<std::optional<Port>> pending() = 0;
  virtual std::error_code unmask(Port local) = 0;
  virtual std::error_code unbind(Port local) = 0;

  /// The ports with an event pending (each now masked), up to out.size(), into `out`; their
  /// count, 0 when nothing is pending. Fewer than out.size() means none is left. A device that
  /// can report several ports at once does it in one call (Xen's /dev/xen/evtchn: one read).
  virtual Result<std::size_t> pending_batch(std::span<Port> out) {
    std::size_t n = 0;
    while (n < out.size()) {
      auto p = pending();
      if (!p) {
        if (n > 0) break;  // the ports taken are still reported; the error comes again
        return p.error();
      }
      if (!*p) break;
      out[n++] = **p;
    }
    return n;
  }
  /// Unmasks every port of `ports` (Xen: one write); the first error, after trying them all.
  virtual std::error_code unmask_batch(std::span<const Port> ports) {
    std::error_code first;
    for (Port p : ports) {
      if (auto ec = unmask(p); ec && !first) first = ec;
    }
    return first;
  }
};

/// A bound port; the destructor unbinds it. Move-only; the EventChannel must outlive it.
class BoundPort {
 public:
  BoundPort() = default;
  BoundPort(EventChannel& ch, Port port) : ch_(&ch), port_(port) {}
  ~BoundPort() { reset(); }
  BoundPort(BoundPort&& o) noexcept : ch_(std::exchange(o.ch_, nullptr)), port_(o.port_) {}
  BoundPort& operator=(BoundPort&& o) noexcept {
    if (this != &o) {
      reset();
      ch_ = std::exchange(o.ch_, nullptr);
      port_ = o.port_;
    }
    return *this;
  }
  BoundPort(const BoundPort&) = delete;
  BoundPort& operator=(const BoundPort&) = delete;

  [[nodiscard]] Port port() const { return port_; }
  [[nodiscard]] bool bound() const { return ch_ != nullptr; }
  std::error_code notify() const { return ch_->notify(port_); }
  std::error_code unmask() const { return ch_->unmask(port_); }
  void reset() {
    if (ch_ != nullptr) (void)std::exchange(ch_, nullptr)->unbind(port_);
  }

 private:
  EventChannel* ch_ = nullptr;
  Port port_{};
};

}  // namespace unetback::hv
