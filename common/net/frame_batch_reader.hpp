// FrameBatchReader: takes the frames waiting on one non-blocking fd (a TAP queue) with as
// few syscalls as the kernel allows. Through io_uring, one io_uring_enter submits a read per
// buffer offered; on a non-blocking fd each read completes inside that call, with a frame or
// with EAGAIN, in submission order, so k waiting frames cost one syscall instead of the k
// reads plus the empty read that ends a plain read() loop. Where io_uring is missing or
// refused (no io_uring in the kernel, sysctl kernel.io_uring_disabled, seccomp), each frame is
// one read(), as before.
//
// A read that io_uring would park until the fd becomes readable (a kernel that does not honour
// O_NONBLOCK for it) must never hold the queue's thread: the batch does not wait for
// completions, it takes those that came in the submitting call. Should one be missing, the
// reader cancels it, waits for the cancel, and reads with read() from then on.
//
// Single-threaded: one reader per queue, used on that queue's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/net/io_uring_ring.hpp"

namespace unetback::net {

class FrameBatchReader {
 public:
  enum class Mode : std::uint8_t { io_uring, read };

  /// `fd` (non-blocking) stays owned by the caller and must outlive the reader. `capacity`:
  /// the most reads one io_uring_enter submits. `allow_io_uring` false forces read().
  /// `nowait` false leaves RWF_NOWAIT off the reads, so that io_uring may park them as it does
  /// on a kernel without it: only for the tests of the guard against parked reads.
  FrameBatchReader(int fd, std::size_t capacity, bool allow_io_uring = true, bool nowait = true);
  ~FrameBatchReader();
  FrameBatchReader(const FrameBatchReader&) = delete;
  FrameBatchReader& operator=(const FrameBatchReader&) = delete;

  [[nodiscard]] Mode mode() const { return ring_.is_open() ? Mode::io_uring : Mode::read; }

  /// Reads frames into bufs, in order: sizes[i] is the length of the frame that landed in
  /// bufs[i], or 0 when that read found nothing (EAGAIN), an empty frame or an error. Returns
  /// how many buffers were tried (the rest were not touched); a result of fewer than
  /// bufs.size(), or a 0 among the tried ones, means the fd had no more frames. With io_uring
  /// at most capacity() buffers are tried per call.
  std::size_t read(std::span<const std::span<std::byte>> bufs, std::span<std::size_t> sizes);

  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  /// Syscalls this reader made (io_uring_enter or read): what the per-packet figures count.
  [[nodiscard]] std::uint64_t syscalls() const { return syscalls_; }
  /// Reads io_uring left pending (kernel did not honour O_NONBLOCK): then mode() is read.
  [[nodiscard]] std::uint64_t parked_reads() const { return parked_; }
  /// The kernel refused RWF_NOWAIT reads (Linux 6.1's TAP): then mode() is read, and reads
  /// that may wait (FramePostedReader) are the way to batch.
  [[nodiscard]] bool refused() const { return refused_; }

 private:
  std::size_t read_plain(std::span<const std::span<std::byte>> bufs, std::span<std::size_t> sizes);
  std::size_t read_uring(std::span<const std::span<std::byte>> bufs, std::span<std::size_t> sizes);
  /// Cancels the reads whose completions did not come, waits for them, closes the ring.
  void give_up_ring(std::size_t n, std::span<std::size_t> sizes);

  int fd_;
  std::size_t capacity_;
  bool nowait_;
  std::uint64_t syscalls_ = 0;
  std::uint64_t parked_ = 0;
  bool refused_ = false;
  std::vector<bool> done_;  // per read of the current batch: its completion came
  IoUringRing ring_;
};

}  // namespace unetback::net
