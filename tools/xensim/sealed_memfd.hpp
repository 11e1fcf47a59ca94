// A memfd of a fixed size: sealed against shrinking and growing, so the processes that map a
// domain's memory (the backend) can never be handed a SIGBUS by a guest truncating it.
#pragma once

#include <cstddef>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::xensim {

/// A zero-filled memfd of `size` bytes named `name` (shown in /proc/PID/fd), with
/// F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL.
Result<UniqueFd> make_sealed_memfd(const char* name, std::size_t size);

}  // namespace unetback::xensim
