// Milestones: info lines that mark where a start or a handover has got to, stamped with the
// wall clock (CLOCK_REALTIME) in the line itself, so that they line up with other tools'
// clocks (ping -D, date +%s.%N) whatever delay the journal adds before it stamps the line.
// Form: "milestone <name> realtime=<seconds>.<microseconds> pid=<pid>[ <detail>]"; the lab
// (tools/xenlab/dom0-run.sh, adopt_split) turns them into the parts of a restart's gap.
#pragma once

#include <string>
#include <string_view>

namespace unetback {

/// CLOCK_REALTIME now, as "<seconds>.<microseconds>" (six digits).
[[nodiscard]] std::string realtime_stamp();

/// The line log_milestone writes (without the log prefix): for tests and the lab's parser.
[[nodiscard]] std::string milestone_line(std::string_view name, std::string_view stamp, long pid,
                                         std::string_view detail = {});

/// Logs milestone `name` (info, prefix "unetbackd") at `stamp` (realtime_stamp(); now if
/// empty), with the daemon's pid and an optional detail ("vif=5/0").
void log_milestone(std::string_view name, std::string_view detail = {},
                   std::string_view stamp = {});

}  // namespace unetback
