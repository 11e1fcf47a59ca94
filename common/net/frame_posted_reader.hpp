// FramePostedReader: reads kept posted on a non-blocking fd (a TAP queue) in an io_uring,
// their completions taken when the ring's fd turns readable. For kernels whose TAP refuses
// RWF_NOWAIT reads (Debian 12's Linux 6.1: the TAP has no FMODE_NOWAIT), where a batch of
// reads that must not wait (FrameBatchReader) is impossible: io_uring parks each read that
// finds the fd empty until a frame comes. Here that parking is the point. The owner posts a
// read per free buffer, submits them in one io_uring_enter (those that find frames complete
// inside it), and watches ring_fd() with its other fds; each frame that comes later completes
// a parked read without a syscall of ours, and the completions of a wakeup are taken from
// shared memory in one go. k frames cost the epoll wakeup and one io_uring_enter to post
// their buffers again, instead of k reads plus the empty one.
//
// The reads of one submit form a chain (IOSQE_IO_HARDLINK: a read starts once the one before
// it completed, whatever its result; a plain link would end at the first frame shorter than
// its buffer): only the chain's first unfinished read is ever parked. Reads parked side by
// side would all wake for each frame, and on Linux 6.1 each one that then finds the TAP empty
// is handed to an io-wq worker to fail with EAGAIN. Post the next chain once one has ended.
//
// Frames complete in the order they were read: every read runs in the owner thread's
// context (inline in io_uring_enter, or as task work when a parked read's fd wakes), one at
// a time, so the completion order is the fd's frame order.
//
// A buffer under a posted read belongs to the kernel until its completion is taken: the owner
// must cancel_all() (which waits) before it frees or reuses a buffer, or closes the fd.
//
// Single-threaded: used on one thread only.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>
#include <vector>

#include "common/net/io_uring_ring.hpp"

namespace unetback::net {

class FramePostedReader {
 public:
  /// `fd` (non-blocking) stays owned by the caller and must outlive the reader. `depth`: the
  /// most reads in flight. is_open() is false where io_uring is unavailable.
  FramePostedReader(int fd, std::size_t depth);
  ~FramePostedReader();
  FramePostedReader(const FramePostedReader&) = delete;
  FramePostedReader& operator=(const FramePostedReader&) = delete;

  [[nodiscard]] bool is_open() const { return ring_.is_open(); }
  /// Readable (poll/epoll) while completions wait to be taken.
  [[nodiscard]] int ring_fd() const { return ring_.fd(); }
  [[nodiscard]] std::size_t depth() const { return depth_; }
  /// Reads posted (submitted or not) whose completion was not taken yet.
  [[nodiscard]] std::size_t in_flight() const { return pending_.size(); }

  /// Queues a read of one frame into `buf`; `tag` names the buffer in its completion. False
  /// when depth() reads are in flight. Nothing reaches the kernel before submit().
  bool post(std::span<std::byte> buf, std::uint32_t tag);
  /// Submits the reads queued since the last call, in one io_uring_enter (none if there are
  /// none). On an error of io_uring_enter itself, the reads it did not take are withdrawn:
  /// `on_frame(tag, 0)` returns their buffers.
  template <typename OnFrame>
  std::error_code submit(OnFrame&& on_frame);
  /// Calls on_frame(tag, len) for every read completed by now, in order, without a syscall:
  /// len is the frame's length, or 0 when the read brought nothing (EAGAIN after a wakeup
  /// another read took, an error, a cancel). Each buffer is the caller's again once reported.
  template <typename OnFrame>
  std::size_t reap(OnFrame&& on_frame);
  /// Cancels every read in flight and waits until each has completed (a frame that came
  /// meanwhile is still reported with its length); every buffer is the caller's again.
  template <typename OnFrame>
  void cancel_all(OnFrame&& on_frame);

  /// Syscalls this reader made (io_uring_enter): what the per-packet figures count.
  [[nodiscard]] std::uint64_t syscalls() const { return syscalls_; }

 private:
  static constexpr std::uint64_t kCancelTag = std::uint64_t{1} << 63;

  /// One completion: the read's tag leaves pending_ and is reported.
  template <typename OnFrame>
  void complete(std::uint64_t tag, std::int32_t res, OnFrame& on_frame);

  int fd_;
  std::size_t depth_;
  std::vector<std::uint32_t> pending_;  // tags of the reads in flight (at most depth_)
  std::size_t queued_ = 0;              // posted since the last submit
  io_uring_sqe* chain_tail_ = nullptr;  // the last read queued since the last submit
  std::uint64_t syscalls_ = 0;
  IoUringRing ring_;
};

template <typename OnFrame>
void FramePostedReader::complete(std::uint64_t tag, std::int32_t res, OnFrame& on_frame) {
  if ((tag & kCancelTag) != 0) return;  // a cancel's own completion
  const auto t = static_cast<std::uint32_t>(tag);
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i] == t) {
      pending_[i] = pending_.back();
      pending_.pop_back();
      break;
    }
  }
  on_frame(t, res > 0 ? static_cast<std::size_t>(res) : 0);
}

template <typename OnFrame>
std::size_t FramePostedReader::reap(OnFrame&& on_frame) {
  if (!ring_.is_open()) return 0;
  return ring_.reap([&](std::uint64_t tag, std::int32_t res) { complete(tag, res, on_frame); });
}

template <typename OnFrame>
std::error_code FramePostedReader::submit(OnFrame&& on_frame) {
  if (queued_ == 0 || !ring_.is_open()) return {};
  queued_ = 0;
  chain_tail_ = nullptr;
  std::size_t calls = 0;
  // Submits them all and waits for none; reads of frames already there complete inside the
  // call and are reported at once.
  const auto ec = ring_.submit_and_reap(
      0, [&](std::uint64_t tag, std::int32_t res) { complete(tag, res, on_frame); }, calls);
  syscalls_ += calls;
  // io_uring_enter itself failed (ENOMEM; EBUSY with completions overflowing): give up the
  // ring, every buffer back to the caller.
  if (ec) cancel_all(on_frame);
  return ec;
}

template <typename OnFrame>
void FramePostedReader::cancel_all(OnFrame&& on_frame) {
  if (!ring_.is_open()) return;
  queued_ = 0;
  chain_tail_ = nullptr;  // queued reads go in first, the cancel after them, unlinked
  std::size_t calls = 0;
  bool by_tag = false;
  // A cancel finds only the chain's started read: the next one then starts (a hard link) and
  // is cancelled in the next round. Each round waits for a completion: a read cancelled, one
  // that took a frame first, or the cancel's own.
  for (std::size_t round = 0; !pending_.empty() && round < 4 * depth_ + 4; ++round) {
    if (!by_tag) {
      // Every read on our fd (IORING_ASYNC_CANCEL_FD | _ALL, Linux 5.19; 6.1 is the oldest
      // kernel this serves).
      if (io_uring_sqe* e = ring_.next_sqe()) {
        e->opcode = IORING_OP_ASYNC_CANCEL;
        e->fd = fd_;
        e->cancel_flags = IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL;
        e->user_data = kCancelTag;
      }
    } else {
      for (const std::uint32_t t : pending_) {  // one cancel per read, by its user_data
        io_uring_sqe* c = ring_.next_sqe();
        if (c == nullptr) break;
        c->opcode = IORING_OP_ASYNC_CANCEL;
        c->addr = t;
        c->user_data = kCancelTag | t;
      }
    }
    bool refused = false;
    const auto ec = ring_.submit_and_reap(
        1,
        [&](std::uint64_t tag, std::int32_t res) {
          if (tag == kCancelTag && res == -EINVAL) refused = true;  // no CANCEL_FD here
          complete(tag, res, on_frame);
        },
        calls);
    if (ec && ec != std::errc::interrupted) break;
    if (refused) by_tag = true;
  }
  syscalls_ += calls;
  // Only if io_uring_enter failed above are reads left: closing the ring makes the kernel
  // cancel them as it tears it down (a parked read's buffer is written only by this thread's
  // own task work, which the teardown's cancel comes before). Their buffers go back as empty.
  ring_.close();
  while (!pending_.empty()) {
    const std::uint32_t t = pending_.back();
    pending_.pop_back();
    on_frame(t, std::size_t{0});
  }
}

}  // namespace unetback::net
