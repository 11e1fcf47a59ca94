// IoUringRing: the smallest io_uring a batch of TAP reads or writes needs, on the raw
// syscalls (no liburing). One ring, one thread: queue SQEs, then one io_uring_enter submits
// them and waits for all their completions.
//
// open() is the runtime probe: it fails (and the caller keeps its plain syscalls) where the
// kernel has no io_uring, where sysctl kernel.io_uring_disabled or a seccomp filter refuses
// it, or where the ring lacks the features relied on (one mapping for both rings, 5.4; no
// dropped completions, 5.5). Debian 12's 6.1 has all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <linux/io_uring.h>
#include <system_error>

#include "common/util/unique_fd.hpp"

namespace unetback::net {

class IoUringRing {
 public:
  IoUringRing() = default;
  ~IoUringRing();
  IoUringRing(const IoUringRing&) = delete;
  IoUringRing& operator=(const IoUringRing&) = delete;

  /// Sets up a ring of at least `entries` SQEs. False (and closed) if io_uring is unavailable.
  /// `cooperative` (COOP_TASKRUN, where the kernel has it) suits a thread that waits for its
  /// completions in io_uring_enter; a ring whose completions are waited for elsewhere (its fd
  /// in an epoll set) needs them run without that wait, so it opens with `cooperative` false.
  bool open(std::size_t entries, bool cooperative = true);
  [[nodiscard]] int fd() const { return fd_.get(); }
  void close();
  [[nodiscard]] bool is_open() const { return fd_.valid(); }
  [[nodiscard]] std::size_t entries() const { return entries_; }

  /// The next free SQE (zeroed), or nullptr when entries() are queued already.
  io_uring_sqe* next_sqe();
  /// Submits every queued SQE and waits for all their completions; calls on_cqe(user_data,
  /// res) for each. Returns the io_uring_enter calls made, or an error of io_uring_enter
  /// itself (then the ring is closed: `not_taken` SQEs, the last ones queued, never ran).
  template <typename OnCqe>
  std::error_code submit_and_wait(OnCqe&& on_cqe, std::size_t& calls, std::size_t& not_taken);
  /// Submits every queued SQE, waits for at least `min_complete` completions (0: none) and
  /// calls on_cqe for every completion posted by then; `calls` counts the io_uring_enter
  /// calls. An error of io_uring_enter itself is returned (the ring stays open).
  template <typename OnCqe>
  std::error_code submit_and_reap(std::size_t min_complete, OnCqe&& on_cqe, std::size_t& calls);
  /// Calls on_cqe for every completion posted by now, without a syscall; returns how many.
  template <typename OnCqe>
  std::size_t reap(OnCqe&& on_cqe);

 private:
  std::error_code enter(std::size_t to_submit, std::size_t min_complete, std::size_t& taken);
  std::uint32_t cq_tail_acquire() const;
  void cq_head_release(std::uint32_t head);

  UniqueFd fd_;
  std::size_t entries_ = 0;
  void* ring_ = nullptr;  // SQ and CQ rings (IORING_FEAT_SINGLE_MMAP)
  std::size_t ring_len_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  std::size_t sqes_len_ = 0;
  std::uint32_t* sq_tail_ = nullptr;
  std::uint32_t sq_mask_ = 0;
  std::uint32_t* sq_array_ = nullptr;
  std::uint32_t* cq_head_ = nullptr;
  std::uint32_t* cq_tail_ = nullptr;
  std::uint32_t cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
  std::uint32_t local_tail_ = 0;  // SQEs queued up to here (published at submit)
  std::size_t queued_ = 0;
};

template <typename OnCqe>
std::size_t IoUringRing::reap(OnCqe&& on_cqe) {
  std::uint32_t head = *cq_head_;  // only we write it
  const std::uint32_t tail = cq_tail_acquire();
  std::size_t n = 0;
  for (; head != tail; ++head, ++n) {
    const io_uring_cqe& c = cqes_[head & cq_mask_];
    on_cqe(c.user_data, c.res);
  }
  cq_head_release(head);
  return n;
}

template <typename OnCqe>
std::error_code IoUringRing::submit_and_wait(OnCqe&& on_cqe, std::size_t& calls,
                                             std::size_t& not_taken) {
  std::size_t to_submit = queued_, done = 0;
  const std::size_t total = queued_;
  queued_ = 0;
  not_taken = 0;
  while (done < total) {
    std::size_t taken = 0;
    ++calls;
    if (auto ec = enter(to_submit, total - done, taken)) {
      if (ec == std::errc::interrupted) continue;
      // Completions of what was taken: a TAP read or write never waits, so each one completed
      // inside the io_uring_enter that submitted it.
      done += reap(on_cqe);
      not_taken = to_submit;
      close();
      return ec;
    }
    to_submit -= taken;
    done += reap(on_cqe);
  }
  return {};
}

template <typename OnCqe>
std::error_code IoUringRing::submit_and_reap(std::size_t min_complete, OnCqe&& on_cqe,
                                             std::size_t& calls) {
  std::size_t to_submit = queued_;
  queued_ = 0;
  do {
    std::size_t taken = 0;
    ++calls;
    if (auto ec = enter(to_submit, min_complete, taken)) {
      if (ec == std::errc::interrupted) continue;
      return ec;
    }
    if (taken == 0 && to_submit != 0)
      return std::make_error_code(std::errc::resource_unavailable_try_again);
    to_submit -= taken;
  } while (to_submit != 0);
  reap(on_cqe);
  return {};
}

}  // namespace unetback::net
