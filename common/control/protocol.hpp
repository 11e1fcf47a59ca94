// The control protocol between unetbackd and unetback-ctl.
//
// A Unix stream socket (default_control_path(); mode 0600: it changes daemon-wide tunables).
// The client writes one request per line (request.hpp: the grammar); the daemon answers each
// with one JSON document on one line (json_writer.hpp), in order, and reads the next request only
// once the reply is written.
//
// Reply shapes (stable for scripts; unetback-ctl prints them as tables):
//   list      {"vifs":[{"vif":"5/0","domid":5,"devid":0,"state":"Connected","state_id":4,
//                       "frontend_state":"Connected","tap":"vif5.0","connected":true,
//                       "carrier":true,"queues":2}]}
//   stats     {"vifs":[{"vif":"5/0",...(as list, but "queues" is the array),
//              "queues":[{"queue":0,"counters":{"rx_packets":1}}]}]}
//              (the counters are named by queue_counter_specs.hpp)
//   rings     {"vif":"5/0","queues":[{"queue":0,"tx":{"req_prod":..,"req_event":..,
//              "rsp_prod":..,"rsp_event":..,"req_cons":..,"rsp_prod_pvt":..},"rx":{...}}]}
//   tunables  {"tunables":[{"name":"max-queues","value":"4","min":1,"max":16,"help":"..."}]}
//   get/set   {"name":"max-queues","value":"4"}
//   status    {"pid":812,"program":"/usr/sbin/unetbackd","started":"1764748800.123456",
//              "version":"0.1.0","vifs":2}
//   upgrade   {"upgrading":true,"pid":812,"program":"/usr/sbin/unetbackd"} (then the daemon
//              hands its vifs over and executes the program again; `status` tells the new image
//              by its "started")
//   errors    {"error":"..."} (json_error(); a refused request, a line too long, too many
//              connections, the daemon out of descriptors)
#pragma once

#include <string>
#include <string_view>

#include "common/hv/hypervisor_spec.hpp"

namespace unetback::control {

/// `/run/unetback/unetbackd.sock` for "xen", `<world-dir>/unetbackd.sock` for "sim:<dir>".
[[nodiscard]] std::string default_control_path(const hv::HypervisorSpec& hypervisor);

/// The one member of an error reply, and a member of no other reply.
inline constexpr std::string_view kErrorKey = "error";

}  // namespace unetback::control
