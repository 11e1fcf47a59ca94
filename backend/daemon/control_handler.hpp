// Answers a parsed control request from the manager's state, as one line of JSON.
//
// Shapes (stable for scripts; unetback-ctl prints them as tables):
//   list      {"vifs":[{"vif":"5/0","domid":5,"devid":0,"state":"Connected","state_id":4,
//                       "frontend_state":"Connected","tap":"vif5.0","connected":true,
//                       "carrier":true,"queues":2}]}
//   stats     {"vifs":[{"vif":"5/0",...(as list, but "queues" is the array),
//              "queues":[{"queue":0,"counters":{"rx_packets":1}}]}]}
//   rings     {"vif":"5/0","queues":[{"queue":0,"tx":{"req_prod":..,"req_event":..,
//              "rsp_prod":..,"rsp_event":..,"req_cons":..,"rsp_prod_pvt":..},"rx":{...}}]}
//   tunables  {"tunables":[{"name":"max-queues","value":"4","min":1,"max":16,"help":"..."}]}
//   get/set   {"name":"max-queues","value":"4"}
//   status    {"pid":812,"program":"/usr/sbin/unetbackd","started":"1764748800.123456",
//              "version":"0.1.0","vifs":2}
//   upgrade   {"upgrading":true,"pid":812,"program":"/usr/sbin/unetbackd"} (then the daemon
//              hands its vifs over and executes the program again; `status` tells the new image
//              by its "started")
//   errors    {"error":"..."}
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "backend/daemon/backend_manager.hpp"
#include "backend/daemon/control_request.hpp"

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
[[nodiscard]] std::string handle_request(const Request& request, BackendManager& manager,
                                         const DaemonInfo* daemon = nullptr);

/// Parses and answers one line.
[[nodiscard]] std::string handle_line(std::string_view line, BackendManager& manager,
                                      const DaemonInfo* daemon = nullptr);

}  // namespace unetback::daemon
