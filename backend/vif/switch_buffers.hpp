// SwitchBuffers: the recycled backend-memory copies of switched (and steered) packets.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/vif/packet_pool.hpp"
#include "backend/vif/rx_release.hpp"

namespace unetback::vif {

/// Backend-memory copies of switched packets, recycled: one owner thread (a sender queue, the
/// uplink thread) takes buffers; each receiver of a packet holds a reference and drops it from
/// its own thread when its copy is done, without a lock (the last one pushes the buffer onto
/// a lock-free return stack the owner takes whole). Replaces a new[] and a shared_ptr control
/// block per copied packet. The buffers are one PacketPool mapping: untouched pages cost nothing.
class SwitchBuffers {
 public:
  static constexpr std::size_t kDefaultCount = 256;
  explicit SwitchBuffers(std::size_t count = kDefaultCount);

  /// Owner thread: a free buffer (holding the owner's reference), or -1 when every buffer is
  /// still read by some receiver.
  [[nodiscard]] int take();
  [[nodiscard]] std::byte* data(int i) const { return pool_.frame(i); }
  /// One more reference for a receiver: run it once that receiver no longer reads the bytes.
  [[nodiscard]] RxRelease share(const std::shared_ptr<SwitchBuffers>& self, int i);
  /// Drops a reference (the owner's, after handing the packet out). Any thread.
  void unref(int i) noexcept;
  /// Owner thread: buffers neither taken nor waiting on the return stack.
  [[nodiscard]] std::size_t free_count() const { return pool_.free_count(); }

 private:
  void take_returned();

  PacketPool pool_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> refs_;
  std::unique_ptr<int[]> next_;    // the return stack's links, by buffer
  std::atomic<int> returned_{-1};  // top of the return stack
};

}  // namespace unetback::vif
