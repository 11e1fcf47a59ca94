// RxRelease: what a queued guest-RX packet runs once nobody reads its bytes any more (a TAP
// buffer back to its pool, a VM->VM sender's slots answered, a shared copy dropped). A
// function pointer and two words, plus an optional reference that keeps the owner of those
// words alive: moving one around or running it never allocates, unlike a std::function
// whose captures outgrow its small buffer (a shared_ptr capture always does).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

namespace unetback::vif {

class RxRelease {
 public:
  using Fn = void (*)(void* ctx, std::uintptr_t arg) noexcept;

  RxRelease() = default;
  RxRelease(Fn fn, void* ctx, std::uintptr_t arg, std::shared_ptr<void> keep = {})
      : fn_(fn), ctx_(ctx), arg_(arg), keep_(std::move(keep)) {}
  /// Only keeps `keep` alive until the release (a buffer shared by several receivers).
  static RxRelease holding(std::shared_ptr<void> keep) {
    return RxRelease(&nothing, nullptr, 0, std::move(keep));
  }
  /// Runs `*f()`; the callable must outlive the packet (tests, the fuzzer).
  template <typename F>
  static RxRelease calling(F* f) {
    return RxRelease([](void* c, std::uintptr_t) noexcept { (*static_cast<F*>(c))(); }, f, 0);
  }

  RxRelease(RxRelease&& o) noexcept
      : fn_(std::exchange(o.fn_, nullptr)), ctx_(o.ctx_), arg_(o.arg_), keep_(std::move(o.keep_)) {}
  RxRelease& operator=(RxRelease&& o) noexcept {
    if (this != &o) {
      fn_ = std::exchange(o.fn_, nullptr);
      ctx_ = o.ctx_;
      arg_ = o.arg_;
      keep_ = std::move(o.keep_);
    }
    return *this;
  }
  RxRelease(const RxRelease&) = delete;
  RxRelease& operator=(const RxRelease&) = delete;

  explicit operator bool() const { return fn_ != nullptr; }
  /// Runs the release once (then it is empty).
  void operator()() {
    if (Fn f = std::exchange(fn_, nullptr)) f(ctx_, arg_);
    keep_.reset();
  }

 private:
  static void nothing(void*, std::uintptr_t) noexcept {}

  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::uintptr_t arg_ = 0;
  std::shared_ptr<void> keep_;
};

}  // namespace unetback::vif
