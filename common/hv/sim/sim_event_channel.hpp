// SimEventChannel: xensim's EventChannel. Each port is an eventfd the broker made; this
// handle watches its ports' eventfds with one epoll set, whose fd is fd().
//
// Xen's model is kept: an event is a pending *bit*, not a count (several notifications
// before pending() collapse into one); pending() returns a port and masks it; an event
// raised while masked stays pending and is reported right after unmask().
//
// The epoll set is edge-triggered and masking lives in this handle, so that a wakeup costs
// no epoll_ctl (the backend's queue masks and unmasks on every event): pending() reads every
// eventfd it is told about, reports the unmasked ones and marks the masked ones pending;
// unmask() of a port that became pending meanwhile signals the port's own eventfd again, so
// that the event is reported at once. pending() takes up to kReadyBatch ports from one
// epoll_wait and, when that batch was not full, says "none" after it without asking the
// kernel again (a port that fires later makes fd() readable: the caller waits on it anyway).
//
// notify() writes to the peer port's eventfd, fetched once from the broker (EVTCHN_PEER):
// by bind_interdomain() (whose peer is bound), else by the first notify(); cached until the
// port's bind_gen in our control page changes. Notifying an unbound
// port (peer not bound yet, or closed) succeeds and does nothing, as EVTCHNOP_send does for
// ECS_UNBOUND. Fault injection (drop, stall) is honoured here, in the sender, through the
// receiving domain's control page.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <sys/epoll.h>
#include <unordered_map>

#include "common/hv/event_channel.hpp"
#include "common/hv/sim/broker_client.hpp"
#include "common/hv/sim/control_page_cache.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::hv::sim {

class SimEventChannel final : public EventChannel {
 public:
  /// `own_control` is our domain's control page. Throws SetupError if epoll fails.
  SimEventChannel(BrokerClient& broker, std::shared_ptr<MappedRegion> own_control,
                  ControlPageCache& peers);
  /// Unbinds every port still bound.
  ~SimEventChannel() override;
  SimEventChannel(const SimEventChannel&) = delete;
  SimEventChannel& operator=(const SimEventChannel&) = delete;

  [[nodiscard]] int fd() const override { return epoll_.get(); }
  Result<Port> bind_unbound(DomId remote) override;
  Result<Port> bind_interdomain(DomId remote, Port remote_port) override;
  /// EINVAL for a port this handle does not hold.
  std::error_code notify(Port local) override;
  Result<std::optional<Port>> pending() override;
  std::error_code unmask(Port local) override;
  std::error_code unbind(Port local) override;

 private:
  struct LocalPort {
    UniqueFd eventfd;
    bool masked = false;
    bool pending_while_masked = false;  // notified while masked: report after unmask()
    bool peer_known = false;            // the fields below are valid for bind_gen `gen`
    std::uint32_t gen = 0;
    UniqueFd peer_fd;  // invalid: unbound, notifications are dropped
    std::uint32_t peer_port = 0;
    std::shared_ptr<MappedRegion> peer_control;
  };

  Result<Port> add_port(Result<BrokerResponse> resp);
  std::error_code refresh_peer(std::uint32_t local, LocalPort& lp);

  BrokerClient& broker_;
  std::shared_ptr<MappedRegion> own_control_;
  ControlPageCache& peers_;
  static constexpr int kReadyBatch = 16;

  UniqueFd epoll_;
  std::mutex mu_;
  epoll_event ready_[kReadyBatch]{};  // from the last epoll_wait, not yet looked at
  int ready_n_ = 0, ready_i_ = 0;
  bool ready_was_short_ = false;  // that epoll_wait returned fewer than kReadyBatch
  std::unordered_map<std::uint32_t, LocalPort> ports_;
};

}  // namespace unetback::hv::sim
