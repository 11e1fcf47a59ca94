// A counting replacement of the global operator new/delete, for the tests that prove a data
// path allocates nothing per packet in steady state. Compile counting_allocator.cpp into the
// test executable itself (its operator new then replaces the library's in that binary).
// Counted are the allocations made while counting is on for every thread (all_threads) or
// for the calling thread (this_thread: the test's own peer, which allocates freely, runs
// outside such a scope).
#pragma once

#include <cstdint>

namespace unetback::test::alloc_count {

void reset();
[[nodiscard]] std::uint64_t count();
void all_threads(bool on);
void this_thread(bool on);

/// Counts this thread's allocations while it lives.
class ThisThread {
 public:
  ThisThread() { this_thread(true); }
  ~ThisThread() { this_thread(false); }
  ThisThread(const ThisThread&) = delete;
  ThisThread& operator=(const ThisThread&) = delete;
};

}  // namespace unetback::test::alloc_count
