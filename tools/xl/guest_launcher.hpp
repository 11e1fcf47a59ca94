// Starts the guest of a xensim domain (the netfront-shim process that runs it) so that it
// outlives unetback-xl, as a real domain outlives `xl create`: its own session (no signal
// from our terminal reaches it), stdin /dev/null, stdout+stderr appended to a log file in
// the world dir. We wait (bounded) for its "netfront-shim ready" line in that log.
#pragma once

#include <chrono>
#include <string>
#include <sys/types.h>
#include <variant>
#include <vector>

#include "common/util/result.hpp"

namespace unetback::toolstack {

struct GuestLaunch {
  std::vector<std::string> argv;  ///< argv[0] is the program path
  std::string log_path;
  std::string ready_prefix = "netfront-shim ready";
  std::chrono::milliseconds ready_timeout{20000};
};

struct LaunchedGuest {
  pid_t pid = 0;
  std::string ready_line;
};

struct LaunchFailure {
  std::string message;  ///< why, with the end of the guest's log
};

/// Starts the guest and waits for its ready line. On failure (exited, or no ready line in
/// time: then it is SIGTERMed, SIGKILLed after 3 s) the message says why.
[[nodiscard]] std::variant<LaunchedGuest, LaunchFailure> launch_guest(const GuestLaunch& launch);

/// Whether `pid` is alive and its command line's first word ends in `program` (a pid file
/// may be stale: never signal a stranger).
[[nodiscard]] bool process_is(pid_t pid, const std::string& program);

/// SIGTERM, wait up to `grace` for it to go (it is not our child: poll kill(pid, 0)),
/// then SIGKILL. Returns true if it went on SIGTERM.
bool terminate_process(pid_t pid, std::chrono::milliseconds grace);

}  // namespace unetback::toolstack
