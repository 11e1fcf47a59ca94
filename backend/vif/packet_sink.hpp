// PacketSink: where guest-TX frames go (the vif's TAP queue; later the internal switch).
#pragma once

#include <span>
#include <sys/uio.h>
#include <system_error>

#include "common/net/vnet_hdr.hpp"

namespace unetback::vif {

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  /// Delivers one frame described by `frame` with its offload header. Synchronous: when it
  /// returns, the sink no longer reads the memory (mapped guest pages may be unmapped).
  virtual std::error_code deliver(const net::VirtioNetHdr& hdr, std::span<const iovec> frame) = 0;
};

}  // namespace unetback::vif
