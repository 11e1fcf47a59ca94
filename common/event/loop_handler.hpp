// What every vif-layer handler on an event loop shares (VifQueue, CtrlRing).
//
// HandlerToken counts a handler from its creation to its destruction, so that stop() can wait
// until none exists: a handler that was running while stop() was called may post another one
// after stop()'s own, and that one must not outlive its object.
//
// run_guarded() runs a handler and hands whatever it throws to the object's own failure path.
// Left to unwind, the exception would reach EventLoopPool's last-resort catch: the loop would
// go on, but the vif would stay connected with no wait armed, its guest's traffic stopped for
// good and nothing to say which vif. A handler that throws fails its vif instead (disabled
// from its event loop, docs/design.md "Conventions"), and only that vif.
#pragma once

#include <atomic>
#include <exception>
#include <utility>

namespace unetback::event {

class HandlerToken {
 public:
  explicit HandlerToken(std::atomic<int>& n) : n_(&n) { n_->fetch_add(1); }
  HandlerToken(const HandlerToken& o) : n_(o.n_) { n_->fetch_add(1); }
  HandlerToken(HandlerToken&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
  HandlerToken& operator=(const HandlerToken&) = delete;
  HandlerToken& operator=(HandlerToken&&) = delete;
  ~HandlerToken() {
    if (n_ != nullptr) n_->fetch_sub(1);
  }

 private:
  std::atomic<int>* n_;
};

/// Runs `handler()`; if it throws, `failed(what)` runs instead of the exception unwinding
/// further. `failed` must not throw.
template <typename F, typename Failed>
void run_guarded(F&& handler, Failed&& failed) noexcept {
  try {
    std::forward<F>(handler)();
  } catch (const std::exception& e) {
    failed(e.what());
  } catch (...) {
    failed("unknown exception");
  }
}

}  // namespace unetback::event
