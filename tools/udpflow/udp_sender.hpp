// The send side of unetback-udpflow: N-byte datagrams to one destination for S seconds, as
// fast as the socket takes them or paced at R per second.
//
// The socket is non-blocking and each pass sends at most one batch (sendmmsg), so the loop
// checks its deadline between batches and never spins on a full buffer: EAGAIN (socket
// buffer full) waits in poll(POLLOUT); ENOBUFS (the device queue is full: the socket stays
// writable, so poll would return at once) sleeps briefly. Both are counted.
#pragma once

#include <atomic>

#include "common/util/result.hpp"
#include "tools/udpflow/flow_report.hpp"
#include "tools/udpflow/udpflow_options.hpp"

namespace unetback::udpflow {

/// Runs the sender until `seconds` pass or `stop` becomes true. Errors: setting up the
/// socket (socket, connect); send errors during the run are counted, not returned.
[[nodiscard]] Result<SendReport> run_send(const SendOptions& opts, const std::atomic<bool>& stop);

}  // namespace unetback::udpflow
