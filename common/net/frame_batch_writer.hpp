// FrameBatchWriter: writes a pass's frames to one fd (a TAP queue) with as few syscalls as
// the kernel allows. Frames are queued with add() and written by flush(): through io_uring,
// one io_uring_enter submits every queued writev and waits for their completions; where
// io_uring is missing or refused (kernel without it, sysctl kernel.io_uring_disabled,
// seccomp, memory limits) the probe at construction fails and each frame is one writev, as
// before. The kernel issues the SQEs in submission order inside io_uring_enter, and a TAP
// write never waits (tun's write path has no blocking step), so the frames reach the host in
// queue order on both paths.
//
// Single-threaded: one writer per queue, used on that queue's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <sys/uio.h>
#include <system_error>
#include <vector>

#include "common/net/io_uring_ring.hpp"
#include "common/net/vnet_hdr.hpp"

namespace unetback::net {

/// io_uring for TAP I/O unless UNETBACK_NO_IO_URING is set in the environment (an operator's
/// way out, and the A/B of the batching); the kernel's own refusal is probed by each writer
/// and reader. Read once per process.
[[nodiscard]] bool io_uring_wanted();

class FrameBatchWriter {
 public:
  /// iovecs per frame, the vnet header included.
  static constexpr std::size_t kMaxIov = 24;

  enum class Mode : std::uint8_t { io_uring, writev };

  /// `fd` stays owned by the caller and must outlive the writer. `capacity`: frames one
  /// io_uring_enter submits together (a larger batch goes in several, in order). `allow_io_uring`
  /// false forces the writev path (tests, and the fallback the probe picks by itself).
  FrameBatchWriter(int fd, std::size_t capacity, bool allow_io_uring = true);
  ~FrameBatchWriter();
  FrameBatchWriter(const FrameBatchWriter&) = delete;
  FrameBatchWriter& operator=(const FrameBatchWriter&) = delete;

  [[nodiscard]] Mode mode() const { return ring_.is_open() ? Mode::io_uring : Mode::writev; }

  /// Queues one frame (the header is copied; the frame's memory must stay valid until
  /// flush() returns). An error only for a frame of too many iovecs (then it is not queued).
  /// In writev mode the frame is written now and its outcome kept for flush().
  std::error_code add(const VirtioNetHdr& hdr, std::span<const iovec> frame);

  /// Writes what is queued and waits for it; results[i] is the outcome of the i-th frame
  /// added since the last flush (results must hold queued() entries). Then the batch is
  /// empty and the frames' memory is no longer read.
  void flush(std::span<std::error_code> results);

  [[nodiscard]] std::size_t queued() const { return queued_; }
  /// Syscalls this writer made for frames (io_uring_enter or writev): what the per-packet
  /// syscall figures count.
  [[nodiscard]] std::uint64_t syscalls() const { return syscalls_; }

 private:
  struct Slot {
    VirtioNetHdr hdr{};
    std::array<iovec, kMaxIov> iov{};
    int iovcnt = 0;
    bool written = false;    // done (writev at add(), or its io_uring completion came)
    std::error_code result;  // then its outcome
  };
  std::error_code write_now(Slot& s);
  /// Hands the unsubmitted frames to the ring and waits for them (their results kept).
  void submit();

  int fd_;
  std::vector<Slot> slots_;
  std::size_t queued_ = 0;
  std::size_t unsubmitted_ = 0;  // the last queued frames, not yet handed to the ring
  std::uint64_t syscalls_ = 0;
  IoUringRing ring_;
};

}  // namespace unetback::net
