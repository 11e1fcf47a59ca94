// CtrlRing: a vif's control ring (netif.h "Control ring"; netback's xenvif_ctrl_action),
// served on one of the daemon's event-loop threads. Each request is copied out of the ring
// once, answered by HashControl and the responses pushed with one conditional notify per
// pass. Reached only through the hypervisor seam (its own grant-table and event-channel
// handles), so it runs on xensim and Xen alike.
//
// The frontend is hostile: a request producer more than a ring ahead of our responses is a
// protocol violation and disables the vif (on_fatal; the teardown runs from the daemon's
// thread); a pass answers at most kRequestsPerPass requests before it yields the thread, so a
// storm of requests costs the storming guest its own latency, not the other queues on that
// thread; the port is unmasked only after the work (lateeoi, XSA-332).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "backend/vif/hash_control.hpp"
#include "common/event/event_loop.hpp"
#include "common/hv/event_channel.hpp"
#include "common/hv/hypervisor.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/result.hpp"

namespace unetback::vif {

class CtrlRing {
 public:
  static constexpr std::uint32_t kRequestsPerPass = 64;

  struct Counters {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> failed{0};  // answered with a status other than SUCCESS
    std::atomic<std::uint64_t> events{0};
  };

  /// Maps the ring (read-write), binds the port and builds the handler. Errors (a bad ref, a
  /// ring already overflowing, a port that does not bind) are this connect's failure. Throws
  /// SetupError only when a handle cannot be opened (EMFILE, ENOMEM).
  static Result<std::unique_ptr<CtrlRing>> open(event::EventLoop& loop, hv::Hypervisor& hv,
                                                DomId frontend, GrantRef ring_ref, Port evtchn,
                                                std::uint32_t num_queues,
                                                std::shared_ptr<SharedHashSettings> publish,
                                                std::string log_prefix,
                                                std::function<void(std::string)> on_fatal);
  ~CtrlRing();  // requires stop() first
  CtrlRing(const CtrlRing&) = delete;
  CtrlRing& operator=(const CtrlRing&) = delete;

  void start();
  /// Stops and waits until no handler of the ring can run. Any thread but the ring's.
  void stop();

  [[nodiscard]] const Counters& counters() const { return counters_; }

 private:
  CtrlRing(event::EventLoop& loop, std::string log_prefix,
           std::function<void(std::string)> on_fatal);
  void do_wait();
  void on_event(const std::error_code& ec);
  /// Answers up to kRequestsPerPass requests; posts itself again while work is left.
  void run();
  /// Runs a handler of the ring: what it throws fails the vif (loop_handler.hpp).
  template <typename F>
  void guarded(F&& f) noexcept;
  template <typename F>
  void post(F&& f);
  void handler_threw(const char* what) noexcept;

  event::EventLoop& loop_;
  std::string prefix_;
  std::function<void(std::string)> on_fatal_;
  std::unique_ptr<hv::GrantTable> table_;
  hv::MappedGrants page_;
  std::optional<ring::CtrlBackRing> ring_;
  std::unique_ptr<hv::EventChannel> evtchn_;
  hv::BoundPort port_;
  std::optional<HashControl> handler_;
  event::LoopWatch sd_;
  Counters counters_;
  bool stopped_ = false;
  bool run_posted_ = false;
  std::atomic<int> outstanding_{0};
};

}  // namespace unetback::vif
