// The message of the SetupError thrown when a Xen device or service cannot be opened. It
// names what was tried and points at xensim, because on a machine without Xen that is what
// the operator wants to run instead.
#pragma once

#include <string>
#include <string_view>

#include "common/util/result.hpp"

namespace unetback::hv {

/// "<what>: cannot open <where>: <strerror(err)> (no Xen here? run with --hypervisor
/// sim:<world-dir> (xensim))"
[[nodiscard]] inline std::string xen_open_error(std::string_view what, std::string_view where,
                                                int err) {
  return std::string(what) + ": cannot open " + std::string(where) + ": " +
         errno_code(err).message() +
         " (no Xen here? run with --hypervisor sim:<world-dir> (xensim))";
}

}  // namespace unetback::hv
