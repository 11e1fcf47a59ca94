// Replaces the global operator new/delete with counting versions. Kept in its own file: when
// the replacement is visible where gtest's `new` is inlined, GCC's -Wmismatched-new-delete
// mistakes the malloc/free pair for a mismatch.
#include "tests/unit/zerocopy/allocation_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<std::size_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) {
    return p;
  }
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t /*n*/) noexcept {
  std::free(p);
}

namespace unetback::test_support {

std::size_t allocation_count() {
  return g_allocations.load(std::memory_order_relaxed);
}

}  // namespace unetback::test_support
