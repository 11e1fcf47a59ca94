// One unetbackd per backend domain. A second daemon would adopt the first one's vifs, fail
// (their rings are in use), write Closing, and the first would take that Closing for the
// toolstack's and tear a good guest down. So a daemon holds two claims before it touches any
// vif, and a second daemon that finds either taken exits 1 with the holder's pid:
//
//  * InstanceLock: an flock()ed file (default /run/unetbackd.lock; one per backend domain in a
//    xensim world). The kernel drops it when its holder dies, however it dies.
//  * the owner node /local/domain/<self>/unetback/owner = the holder's pid, for daemons that
//    do not see each other's lock file (another --lock-file, another mount namespace). A stale
//    node (its pid gone, or now another program or another user's process, whatever its name)
//    does not block a restart after a crash.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

#include "common/hv/xenstore.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::daemon {

/// An exclusive flock on a file, held until destruction. The file holds the holder's pid (for
/// the message a second daemon gives); it is left in place, as stale content is harmless.
class InstanceLock {
 public:
  /// Takes the lock without waiting. SetupError when another process holds it (the message
  /// names it) or the file cannot be opened.
  static InstanceLock acquire(const std::string& path);
  /// --takeover: sends SIGUSR2 to the process holding the lock (its pid is in the file) and
  /// waits up to `timeout_ms` for the lock. Without a holder it is acquire().
  static InstanceLock take_over(const std::string& path, int timeout_ms);
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  InstanceLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

/// `/local/domain/<self>/unetback/owner`.
[[nodiscard]] std::string owner_node(DomId self);

/// True if `pid` is a live process of this user running the same program file as this one
/// (so a pid reused by something else after a crash does not count, even if it has the name).
[[nodiscard]] bool is_live_daemon(pid_t pid);

/// Writes our pid into the owner node, in a transaction, unless it names another live
/// daemon: then SetupError naming that pid.
void claim_owner_node(hv::XenStore& xs, DomId self);
/// Removes the owner node if it still names us (an orderly exit).
void release_owner_node(hv::XenStore& xs, DomId self);

}  // namespace unetback::daemon
