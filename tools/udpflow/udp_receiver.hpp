// The receive side of unetback-udpflow: counts datagrams on one UDP port for a window of S
// seconds, from the first datagram (or from the start), with loss from sequence numbers
// (SeqTracker) and the socket's own drop count (SO_RXQ_OVFL).
//
// Only the first 8 bytes of each datagram are read (recvmmsg with MSG_TRUNC still reports
// the full length), so large datagrams cost no copy.
#pragma once

#include <atomic>

#include "common/util/result.hpp"
#include "tools/udpflow/flow_report.hpp"
#include "tools/udpflow/udpflow_options.hpp"

namespace unetback::udpflow {

struct RecvOutcome {
  RecvReport report;
  bool got_first = false;  ///< false: nothing arrived within --wait (without --from-start)
};

/// Runs the receiver until the window ends, `stop` becomes true, or (without from_start) no
/// datagram arrived within opts.wait. Errors: setting up the socket (socket, bind).
[[nodiscard]] Result<RecvOutcome> run_recv(const RecvOptions& opts, const std::atomic<bool>& stop);

}  // namespace unetback::udpflow
