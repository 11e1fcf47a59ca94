// TapRxWriter: the shim's guest-RX sink. Netfront's poll hands it each received packet where
// it lies in the RX buffer pages; it queues the packet for the TAP and writes the poll's
// packets in one go at the poll's flush(), before the poll posts the pages again: through
// io_uring one io_uring_enter for the batch (FrameBatchWriter), else one writev per packet.
// Each packet is its virtio_net_hdr, its first bytes (the headers, copied into a private
// head buffer of its own and mapped from there: the backend keeps write access to the RX
// pages, and what was parsed is what is written), then the rest straight from the pages. No
// allocation and no copy of the payload per packet. A packet whose headers are longer than
// that head is gathered whole into a buffer allocated once, with the writer.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <system_error>
#include <vector>

#include "common/net/frame_batch_writer.hpp"
#include "frontend-shim/netfront_types.hpp"

namespace unetback::shim {

class TapRxWriter final : public netfront::RxSink {
 public:
  /// Bytes copied ahead of the pages: Ethernet + VLAN + IPv6 + a TCP header with every
  /// option (14 + 4 + 40 + 60) fit.
  static constexpr std::size_t kHeadLen = 128;

  /// Packets written per io_uring_enter at most (a poll's budget is 64).
  static constexpr std::size_t kBatch = 64;

  /// `allow_io_uring` false: one writev per packet (io_uring is also left out where the
  /// kernel refuses it, or with UNETBACK_NO_IO_URING set).
  explicit TapRxWriter(bool allow_io_uring = net::io_uring_wanted());

  /// Where the next packets go (a TAP queue's fd; anything writev() accepts). What is queued
  /// for the previous fd is written first.
  void set_fd(int fd);

  void deliver(const netfront::RxView& packet) override;
  /// Writes the queued packets (the poll calls it before posting their pages again).
  void flush() override;

  /// Packets written; packets dropped (bad offload metadata or a failed write); packets
  /// whose headers ran past kHeadLen and were gathered whole first.
  [[nodiscard]] std::uint64_t written() const { return written_; }
  [[nodiscard]] std::uint64_t dropped() const { return dropped_; }
  [[nodiscard]] std::uint64_t linearised() const { return linearised_; }
  /// Syscalls made to write packets (io_uring_enter or writev), over every fd.
  [[nodiscard]] std::uint64_t syscalls() const;
  /// Whether the packets for the current fd go through io_uring.
  [[nodiscard]] bool batched() const {
    return writer_ != nullptr && writer_->mode() == net::FrameBatchWriter::Mode::io_uring;
  }

 private:
  bool allow_io_uring_;
  int fd_ = -1;
  // One writer per fd the writer was pointed at (a TAP queue each; created at the first
  // set_fd of that fd, so never while packets flow).
  std::vector<std::pair<int, std::unique_ptr<net::FrameBatchWriter>>> writers_;
  net::FrameBatchWriter* writer_ = nullptr;
  std::vector<std::array<std::byte, kHeadLen>> heads_;  // one per queued packet
  std::vector<std::byte> linear_;
  bool linear_queued_ = false;  // a queued packet points into linear_
  std::array<std::error_code, kBatch> results_{};
  std::uint64_t written_ = 0, dropped_ = 0, linearised_ = 0;
};

}  // namespace unetback::shim
