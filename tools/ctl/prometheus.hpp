// The daemon's counters in the Prometheus text exposition format (version 0.0.4), rendered
// from its `stats` reply (shape in common/control/protocol.hpp). The per-queue counter
// names and help texts come from common/control/queue_counter_specs.hpp, the one list of them: a
// counter `rx_packets` becomes `unetback_rx_packets_total{vif="vif5.0",domid="5",devid="0",
// queue="0"}`. Pure: text in, text out.
#pragma once

#include <string>
#include <string_view>

#include "tools/ctl/json_value.hpp"

namespace unetback::ctl {

/// The exposition text for a `stats` reply: per-vif gauges (connected, carrier, backend state,
/// queues), per-queue counters, and the daemon's mapped grant pages. Every family gets its
/// HELP and TYPE lines, also when no vif has samples for it.
[[nodiscard]] std::string format_prometheus(const JsonValue& stats_reply);

/// `value` escaped for a label value: backslash, double quote and newline.
[[nodiscard]] std::string escape_label_value(std::string_view value);

/// The Content-Type of format_prometheus()'s text.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace unetback::ctl
