// PacketPool: fixed-size, page-aligned packet buffers for one queue, allocated once.
//
// Page alignment matters twice: grant-copy chunks are split at page boundaries, so an
// aligned buffer gives the fewest segments; and glibc memcpy from a page-aligned source into
// a misaligned destination ran 2.5-12x slower on these machines (xensim benchmark). The
// buffers are one anonymous mapping, so untouched pages cost no memory: a queue holding small
// packets only touches the first page of each buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace unetback::vif {

class PacketPool {
 public:
  /// Bytes per buffer: a 12-byte virtio_net_hdr in front of the largest frame a TAP with
  /// TSO hands out (64 KiB + headers), rounded up to whole pages; the frame itself starts on a
  /// page boundary at offset kFrameOffset.
  static constexpr std::size_t kFrameOffset = 4096;
  static constexpr std::size_t kMaxFrame = 65536 + 4096;
  static constexpr std::size_t kBufferSize = kFrameOffset + kMaxFrame;

  explicit PacketPool(std::size_t count);
  ~PacketPool();
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  /// A free buffer index, or -1 when the pool is exhausted.
  [[nodiscard]] int take() {
    if (free_.empty()) return -1;
    const int i = free_.back();
    free_.pop_back();
    return i;
  }
  void give_back(int i) { free_.push_back(i); }

  [[nodiscard]] std::byte* buffer(int i) const {
    return base_ + static_cast<std::size_t>(i) * kBufferSize;
  }
  /// Where the frame starts (page-aligned); the vnet header sits just before it.
  [[nodiscard]] std::byte* frame(int i) const { return buffer(i) + kFrameOffset; }
  [[nodiscard]] std::size_t free_count() const { return free_.size(); }
  [[nodiscard]] std::size_t count() const { return count_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t count_;
  std::vector<int> free_;
};

}  // namespace unetback::vif
