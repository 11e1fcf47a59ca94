// The xentoollog logger handed to every libxen* open call, so that the libraries' own
// messages go through unetback's log (with our timestamps and levels) instead of straight to
// stderr, and so that messages a guest can provoke (a failed map of a bad grant ref logs in
// libxengnttab) are rate-limited (docs/design.md, "Conventions").
#pragma once

struct xentoollog_logger;

namespace unetback::hv {

/// A process-wide logger with static storage; never destroyed, safe from any thread.
[[nodiscard]] xentoollog_logger* xen_tool_logger();

}  // namespace unetback::hv
