// What both files of a queue's code share: the sizes of the host side's batches and the clock a
// pass reads. vif_queue.cpp holds the queue's event wiring, its ring passes and timers;
// vif_queue_host.cpp the host side (frames from the TAP into the guest-RX queue).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdlib>

#include "common/util/coarse_clock.hpp"

namespace unetback::vif::queue_pass {

using Clock = std::chrono::steady_clock;

/// Host->TAP frames buffered per queue before the guest takes them (virtual: untouched
/// buffer pages cost nothing).
constexpr std::size_t kRxPoolBuffers = 256;
/// Frames read from the TAP per wakeup before the ring is served.
constexpr int kTapReadBudget = 64;
/// Reads one io_uring_enter submits: one call takes what a wakeup finds (a burst beyond it
/// takes another), and an idle TAP costs that many reads that find nothing, inside one call.
constexpr std::size_t kTapReadBatch = 16;

/// The clock of a pass: coarse (no syscall, see coarse_clock.hpp) unless UNETBACK_PRECISE_CLOCK
/// is set (steady_clock: the way to compare the two in the lab, --b-env). In the lab's full
/// 3-round A/B (PV dom0, 2026-12-02) the coarse clock cut clock_gettime from 0.47 / 0.39 to
/// 0.05 / 0.12 per packet (guest RX / TX), every other call the same per packet; the
/// throughput difference stayed inside the rounds' spread (CHANGELOG.md, 2026-12-02).
inline Clock::time_point pass_now() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing sets the environment while queues run.
  static const bool coarse = std::getenv("UNETBACK_PRECISE_CLOCK") == nullptr;
  return coarse ? coarse_now() : Clock::now();
}

}  // namespace unetback::vif::queue_pass
