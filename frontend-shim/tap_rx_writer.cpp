#include "frontend-shim/tap_rx_writer.hpp"

#include <algorithm>
#include <cstring>
#include <sys/uio.h>

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

TapRxWriter::TapRxWriter() : linear_(std::size_t{netfront::kMaxRxDataSlots} * wire::kPageSize) {}

void TapRxWriter::deliver(const netfront::RxView& packet) {
  std::array<iovec, 2 + netfront::kMaxRxDataSlots> iov{};
  std::size_t niov = 1;
  const std::size_t bytes = std::min<std::size_t>(packet.bytes, linear_.size());
  const std::size_t head_len = std::min(bytes, kHeadLen);
  gather(packet.segments, std::span(head_.data(), head_len));
  auto hdr = rx_to_tap(packet.flags, packet.gso, std::span(head_.data(), head_len), bytes);
  if (!hdr && hdr.error() == make_error_code(net::NetError::truncated) && bytes > head_len) {
    // The headers run past the head (IPv6 extension headers): map the whole packet.
    gather(packet.segments, std::span(linear_.data(), bytes));
    hdr = rx_to_tap(packet.flags, packet.gso, std::span(linear_.data(), bytes), bytes);
    iov[niov++] = {linear_.data(), bytes};
    ++linearised_;
  } else {
    iov[niov++] = {head_.data(), head_len};
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
  if (!hdr) {
    ++dropped_;
    return;
  }
  iov[0] = {&*hdr, net::kVnetHdrLen};
  if (::writev(fd_, iov.data(), static_cast<int>(niov)) < 0) {
    // A TAP that cannot take the frame drops it, as a NIC without room would.
    ++dropped_;
    return;
  }
  ++written_;
}

}  // namespace unetback::shim
