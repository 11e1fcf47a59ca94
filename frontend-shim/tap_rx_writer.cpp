#include "frontend-shim/tap_rx_writer.hpp"

#include <algorithm>
#include <cstring>
#include <sys/uio.h>
#include <utility>

#include "common/net/net_error.hpp"
#include "frontend-shim/shim_offload.hpp"

namespace unetback::shim {

namespace {

/// Copies the first dst.size() bytes of `segs` into `dst`.
void gather(std::span<const std::span<std::byte>> segs, std::span<std::byte> dst) {
  std::size_t at = 0;
  for (const std::span<std::byte> seg : segs) {
    if (at == dst.size()) break;
    const std::size_t n = std::min(seg.size(), dst.size() - at);
    std::memcpy(dst.data() + at, seg.data(), n);
    at += n;
  }
}

}  // namespace

TapRxWriter::TapRxWriter(bool allow_io_uring)
    : allow_io_uring_(allow_io_uring),
      heads_(kBatch),
      linear_(std::size_t{netfront::kMaxRxDataSlots} * wire::kPageSize) {}

void TapRxWriter::set_fd(int fd) {
  if (writer_ != nullptr && fd == fd_) return;
  flush();
  fd_ = fd;
  for (const auto& [f, w] : writers_) {
    if (f == fd) {
      writer_ = w.get();
      return;
    }
  }
  writers_.emplace_back(fd, std::make_unique<net::FrameBatchWriter>(fd, kBatch, allow_io_uring_));
  writer_ = writers_.back().second.get();
}

std::uint64_t TapRxWriter::syscalls() const {
  std::uint64_t n = 0;
  for (const auto& [f, w] : writers_) n += w->syscalls();
  return n;
}

void TapRxWriter::deliver(const netfront::RxView& packet) {
  if (writer_ == nullptr) {
    ++dropped_;  // no TAP to write to
    return;
  }
  if (writer_->queued() == kBatch) flush();
  std::array<iovec, 1 + netfront::kMaxRxDataSlots> iov{};
  std::size_t niov = 0;
  const std::size_t bytes = std::min<std::size_t>(packet.bytes, linear_.size());
  const std::size_t head_len = std::min(bytes, kHeadLen);
  std::byte* head = heads_[writer_->queued()].data();
  gather(packet.segments, std::span(head, head_len));
  auto hdr = rx_to_tap(packet.flags, packet.gso, std::span(head, head_len), bytes);
  if (!hdr && hdr.error() == make_error_code(net::NetError::truncated) && bytes > head_len) {
    // The headers run past the head (IPv6 extension headers): map the whole packet. One
    // linear buffer: a packet still queued from it is written first.
    if (linear_queued_) flush();
    gather(packet.segments, std::span(linear_.data(), bytes));
    hdr = rx_to_tap(packet.flags, packet.gso, std::span(linear_.data(), bytes), bytes);
    iov[niov++] = {linear_.data(), bytes};
    linear_queued_ = true;
    ++linearised_;
  } else {
    iov[niov++] = {head, head_len};
    // The rest from the pages, past the bytes the head took.
    std::size_t skip = head_len;
    for (const std::span<std::byte> seg : packet.segments) {
      if (skip >= seg.size()) {
        skip -= seg.size();
        continue;
      }
      iov[niov++] = {seg.data() + skip, seg.size() - skip};
      skip = 0;
    }
  }
  if (!hdr || writer_->add(*hdr, std::span(iov.data(), niov))) ++dropped_;
}

void TapRxWriter::flush() {
  linear_queued_ = false;
  if (writer_ == nullptr || writer_->queued() == 0) return;
  const std::size_t n = writer_->queued();
  writer_->flush(std::span(results_).first(n));
  for (std::size_t i = 0; i < n; ++i) {
    // A TAP that cannot take the frame drops it, as a NIC without room would.
    if (results_[i]) {
      ++dropped_;
    } else {
      ++written_;
    }
  }
}

}  // namespace unetback::shim
