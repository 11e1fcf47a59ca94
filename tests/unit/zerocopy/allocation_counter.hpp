// Counts global operator new calls in this test binary, so a test can assert that the
// PendingLimiter's per-packet calls allocate nothing (the limiter must be allocation-free after
// construction: it runs once per TX packet).
#pragma once

#include <cstddef>

namespace unetback::test_support {

/// Number of global `operator new` calls so far in this process.
[[nodiscard]] std::size_t allocation_count();

}  // namespace unetback::test_support
