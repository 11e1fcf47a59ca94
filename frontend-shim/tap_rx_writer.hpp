// TapRxWriter: the shim's guest-RX sink. Netfront's poll hands it each received packet where
// it lies in the RX buffer pages; it writes the packet to the TAP with one writev, before
// the poll posts the pages again: its virtio_net_hdr, its first bytes (the headers, copied
// into a private buffer and mapped from there: the backend keeps write access to the RX
// pages, and what was parsed is what is written), then the rest straight from the pages.
// No allocation and no copy of the payload per packet. A packet whose headers are longer
// than that head is gathered whole into a buffer allocated once, with the writer.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "frontend-shim/netfront_types.hpp"

namespace unetback::shim {

class TapRxWriter final : public netfront::RxSink {
 public:
  /// Bytes copied ahead of the pages: Ethernet + VLAN + IPv6 + a TCP header with every
  /// option (14 + 4 + 40 + 60) fit.
  static constexpr std::size_t kHeadLen = 128;

  TapRxWriter();

  /// Where the next packets go (a TAP queue's fd; anything writev() accepts).
  void set_fd(int fd) { fd_ = fd; }

  void deliver(const netfront::RxView& packet) override;

  /// Packets written; packets dropped (bad offload metadata or a failed write); packets
  /// whose headers ran past kHeadLen and were gathered whole first.
  [[nodiscard]] std::uint64_t written() const { return written_; }
  [[nodiscard]] std::uint64_t dropped() const { return dropped_; }
  [[nodiscard]] std::uint64_t linearised() const { return linearised_; }

 private:
  int fd_ = -1;
  std::array<std::byte, kHeadLen> head_{};
  std::vector<std::byte> linear_;
  std::uint64_t written_ = 0, dropped_ = 0, linearised_ = 0;
};

}  // namespace unetback::shim
