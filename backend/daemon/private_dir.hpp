// The directories the daemon trusts what it finds in: the state records (adopted as the rings'
// truth, their TAPs attached and removed) and the control socket's (the socket itself is 0600,
// but whoever may write its directory can replace it). A directory that another local user may
// write to, or that another user owns, would let that user plant records, links or a socket the
// daemon then trusts: the daemon refuses to start with one.
#pragma once

#include <string>
#include <string_view>

namespace unetback::daemon {

/// SetupError naming `what` and `dir` unless `dir` is a directory (not a link to one) owned by
/// this process's user and writable by nobody else (no group or other write bit).
void require_private_directory(const std::string& dir, std::string_view what);

}  // namespace unetback::daemon
