#include "backend/vif/switch_buffers.hpp"

namespace unetback::vif {

SwitchBuffers::SwitchBuffers(std::size_t count)
    : pool_(count),
      refs_(std::make_unique<std::atomic<std::uint32_t>[]>(count)),
      next_(std::make_unique<int[]>(count)) {}

int SwitchBuffers::take() {
  if (pool_.free_count() == 0) take_returned();
  const int i = pool_.take();
  if (i >= 0) refs_[i].store(1, std::memory_order_relaxed);
  return i;
}

RxRelease SwitchBuffers::share(const std::shared_ptr<SwitchBuffers>& self, int i) {
  refs_[i].fetch_add(1, std::memory_order_relaxed);
  return RxRelease(
      [](void* c, std::uintptr_t idx) noexcept {
        static_cast<SwitchBuffers*>(c)->unref(static_cast<int>(idx));
      },
      this, static_cast<std::uintptr_t>(i), self);
}

void SwitchBuffers::unref(int i) noexcept {
  if (refs_[i].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last reader: onto the return stack. Only the owner pops, and it takes the whole
  // stack at once, so a node is never popped and pushed back under a pusher's feet (no ABA).
  int top = returned_.load(std::memory_order_relaxed);
  do {
    next_[i] = top;
  } while (!returned_.compare_exchange_weak(top, i, std::memory_order_release,
                                            std::memory_order_relaxed));
}

void SwitchBuffers::take_returned() {
  for (int i = returned_.exchange(-1, std::memory_order_acquire); i >= 0; i = next_[i])
    pool_.give_back(i);
}

}  // namespace unetback::vif
