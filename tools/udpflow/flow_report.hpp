// What unetback-udpflow prints: one line of key=value pairs, or one JSON object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace unetback::udpflow {

struct SendReport {
  std::uint64_t packets = 0, bytes = 0;
  std::uint64_t errors = 0;   ///< send errors other than EAGAIN/ENOBUFS (e.g. ECONNREFUSED)
  std::uint64_t eagain = 0;   ///< the socket buffer was full: waited in poll
  std::uint64_t enobufs = 0;  ///< the device queue was full: slept briefly
  double seconds = 0;
};

struct RecvReport {
  std::uint64_t packets = 0, bytes = 0;
  double seconds = 0;
  std::optional<std::uint64_t> lost;  ///< only when every packet carried a sequence number
  std::uint64_t duplicates = 0, reordered = 0;
  std::uint64_t socket_drops = 0;  ///< SO_RXQ_OVFL: datagrams the socket buffer refused
};

/// Packets per second (0 for a zero-length run).
[[nodiscard]] double rate(std::uint64_t packets, double seconds);

/// `sent=N pps=R bytes=B errors=E eagain=A enobufs=F seconds=S`, or JSON.
[[nodiscard]] std::string format_send(const SendReport& r, bool json);
/// `received=N pps=R bytes=B [lost=L] seconds=S duplicates=D reordered=O socket_drops=K`, or
/// JSON with the same fields ("packets" for received; "lost" omitted when unknown).
[[nodiscard]] std::string format_recv(const RecvReport& r, bool json);

}  // namespace unetback::udpflow
