// Per-queue counters (every counter Linux netback keeps, plus what the benchmarks report): one
// of each that the control protocol names (UNETBACK_QUEUE_COUNTERS, in
// common/control/queue_counter_specs.hpp). Written by the queue's own thread with relaxed
// atomics, read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/control/queue_counter_specs.hpp"

namespace unetback::vif {

struct QueueCounters {
#define UNETBACK_DECLARE(name, help) std::atomic<std::uint64_t> name{0};
  UNETBACK_QUEUE_COUNTERS(UNETBACK_DECLARE)
#undef UNETBACK_DECLARE

  static void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // one writer
  }

  [[nodiscard]] std::vector<std::pair<std::string, std::uint64_t>> snapshot() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
#define UNETBACK_SNAPSHOT(name, help) out.emplace_back(#name, name.load(std::memory_order_relaxed));
    UNETBACK_QUEUE_COUNTERS(UNETBACK_SNAPSHOT)
#undef UNETBACK_SNAPSHOT
    return out;
  }
};

}  // namespace unetback::vif
