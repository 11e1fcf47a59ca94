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
//   errors    {"error":"..."}
#pragma once

#include <string>

#include "backend/daemon/backend_manager.hpp"
#include "backend/daemon/control_request.hpp"

namespace unetback::daemon {

[[nodiscard]] std::string handle_request(const Request& request, BackendManager& manager);

/// Parses and answers one line.
[[nodiscard]] std::string handle_line(std::string_view line, BackendManager& manager);

}  // namespace unetback::daemon
