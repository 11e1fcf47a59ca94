// Answers a parsed control request from the manager's state, as one line of JSON (the reply
// shapes are in common/control/protocol.hpp).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "backend/daemon/backend_manager.hpp"
#include "common/control/request.hpp"

namespace unetback::daemon {

/// What only the daemon's main knows: for `status` and `upgrade`.
struct DaemonInfo {
  long pid = 0;
  std::string program;
  /// This image's start (realtime seconds, "s.us").
  std::string started;
  std::string version;
  /// Starts an upgrade once the reply is sent; why not, if it cannot.
  std::function<std::optional<std::string>()> upgrade;
  /// Why the last upgrade did not happen (its successor could not start, or ended before it
  /// took over); empty otherwise. `status` reports it.
  std::string upgrade_error;
};

/// `daemon` may be null (tests of the vif requests): status and upgrade then answer an error.
[[nodiscard]] std::string handle_request(const control::Request& request, BackendManager& manager,
                                         const DaemonInfo* daemon = nullptr);

/// Parses and answers one line.
[[nodiscard]] std::string handle_line(std::string_view line, BackendManager& manager,
                                      const DaemonInfo* daemon = nullptr);

}  // namespace unetback::daemon
