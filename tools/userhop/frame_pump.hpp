// FramePump: one direction of the user-hop forwarder. Reads whole frames from one fd and
// writes each unchanged to another, with one buffer allocated at construction (no
// per-packet allocation).
//
// It relies only on "one read() is one frame, one write() is one frame", which a TAP gives
// (and a SOCK_SEQPACKET socket, which the unit tests use instead of a TAP).
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>
#include <vector>

namespace unetback::userhop {

struct PumpCounters {
  std::uint64_t frames = 0;         // frames written whole
  std::uint64_t bytes = 0;          // their bytes (vnet header included)
  std::uint64_t write_dropped = 0;  // destination full (EAGAIN/ENOBUFS): dropped, as a switch does
  std::uint64_t write_errors = 0;   // destination refused the frame (e.g. EINVAL: bad GSO)
  std::uint64_t read_errors = 0;    // reads that failed with something other than EAGAIN/EINTR
};

enum class PumpStatus : std::uint8_t {
  drained,  // the source had nothing more (EAGAIN)
  more,     // the budget ran out with frames possibly still waiting
  closed,   // the source reported end of file (a socket whose peer is gone)
  failed,   // the source failed: see error()
};

class FramePump {
 public:
  /// The frame buffer holds the largest frame a TAP with TSO hands out: a 12-byte vnet
  /// header, a 64 KiB GSO super-frame and an Ethernet header with one VLAN tag.
  static constexpr std::size_t kDefaultBufferSize = 12 + 65536 + 18;

  FramePump(int from_fd, int to_fd, std::size_t buffer_size = kDefaultBufferSize);

  /// Moves at most `budget` frames from the source to the destination. Both fds should be
  /// non-blocking; EINTR is retried.
  [[nodiscard]] PumpStatus pump(std::uint32_t budget) noexcept;

  [[nodiscard]] const PumpCounters& counters() const { return counters_; }
  /// The last source error (PumpStatus::failed) or destination error (write_errors).
  [[nodiscard]] std::error_code error() const { return error_; }

 private:
  int from_;
  int to_;
  std::vector<std::byte> buf_;
  PumpCounters counters_;
  std::error_code error_;
};

}  // namespace unetback::userhop
