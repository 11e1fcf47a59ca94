// Upgrading unetbackd (issue 20): the running daemon starts its program file again (the new
// binary a package upgrade put there) as a child with --takeover, and serves on while the child
// opens the hypervisor and xenstore, reads the tunables and starts its threads. Then the child
// asks for the handover (SIGUSR2, as any --takeover does); the old daemon hands every vif over,
// names the child systemd's main process (MAINPID=) and exits, and the child adopts the vifs.
// Only the handover and the adoption fall into the guests' gap, not the exec, the dynamic
// linking and the setup (about 280 ms of a 400-650 ms gap in the real-Xen lab under TCG).
//
// The child finds the TAP queues the way systemd passes a service its stored fds: at 3, 4, ...
// without close-on-exec, with LISTEN_PID (its own pid), LISTEN_FDS and LISTEN_FDNAMES
// (FdStore::from_environment reads them), so the TAPs never lose their carrier; the rings, ports
// and in-flight requests come back from the state records exactly as in any takeover. A systemd
// watchdog (WATCHDOG_USEC) is handed on with WATCHDOG_PID naming the child.
#pragma once

#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "common/util/result.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::daemon {

/// This process's program file (readlink /proc/self/exe), read at start: after a package
/// upgrade replaced the file, the link names the old, deleted inode ("... (deleted)"), while
/// this path names the new program. Empty if it cannot be read.
[[nodiscard]] std::string program_path_now();

/// `environ` without LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES, then those three for `pid` and
/// `names` (none if `names` is empty).
[[nodiscard]] std::vector<std::string> listen_environment(const char* const* environ, pid_t pid,
                                                          const std::vector<std::string>& names);

/// Starts `program` with `argv` as a child of this process: `fds` (borrowed, named) at 3, 4, ...
/// (in order, without close-on-exec) with LISTEN_PID (the child's pid), LISTEN_FDS and
/// LISTEN_FDNAMES, and WATCHDOG_PID naming the child when this process has WATCHDOG_USEC. Every
/// other descriptor above 2 closes at the child's exec. The child's pid, or why not (a failed
/// exec shows as the child's exit status 127).
[[nodiscard]] Result<pid_t> spawn_with_fds(const std::string& program,
                                           const std::vector<std::string>& argv,
                                           const std::vector<std::pair<std::string, int>>& fds);

}  // namespace unetback::daemon
