// Upgrading unetbackd in place (issue 20): the running daemon hands every vif over, as for a
// takeover, and executes its program file again (the new binary a package upgrade put there)
// in the same process. The pid stays, so systemd's unit, its fd store, the control socket's
// path and the guests see the same daemon; nothing is forked, and no service manager has to stop
// and start a unit in between (the lab's `systemctl restart` spent 0.4-0.6 s there).
//
// The new image finds the TAP queues the way systemd passes a service its stored fds: at 3, 4,
// ... without close-on-exec, with LISTEN_PID (this pid), LISTEN_FDS and LISTEN_FDNAMES
// (FdStore::from_environment reads them), so the TAPs never lose their carrier; the rings, ports
// and in-flight requests come back from the state records exactly as in a takeover.
#pragma once

#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

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

/// Executes `program` with `argv` in this process, `fds` at 3, 4, ... (in order, without
/// close-on-exec) and their names in LISTEN_FDNAMES. Every other fd above 2 is made
/// close-on-exec first (a library's descriptor opened without O_CLOEXEC included). Returns
/// only if the exec failed, with why; the fds at 3.. are then the ones passed, anything that
/// sat there before is closed, and the rest are close-on-exec.
[[nodiscard]] std::string exec_with_fds(const std::string& program,
                                        const std::vector<std::string>& argv,
                                        std::vector<std::pair<std::string, UniqueFd>>&& fds);

}  // namespace unetback::daemon
