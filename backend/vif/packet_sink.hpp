// PacketSink: where guest-TX frames go (the vif's TAP queue), a pass's frames at a time.
#pragma once

#include <span>
#include <sys/uio.h>
#include <system_error>

#include "common/net/vnet_hdr.hpp"

namespace unetback::vif {

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  /// Takes one frame described by `frame` with its offload header. A sink may only queue it:
  /// its memory must stay valid (mapped guest pages mapped) until flush() returned. An error
  /// here is the frame's outcome at once (it is not counted by flush()).
  virtual std::error_code deliver(const net::VirtioNetHdr& hdr, std::span<const iovec> frame) = 0;
  /// Completes every frame deliver() took since the last flush: results[i] is the outcome of
  /// the i-th of them. Afterwards the sink no longer reads their memory.
  virtual void flush(std::span<std::error_code> results) {
    for (auto& r : results) r = {};
  }
};

}  // namespace unetback::vif
