#include "common/net/io_uring_ring.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util/result.hpp"

namespace unetback::net {
namespace {

// The kernel's ABI (linux/io_uring.h); liburing wraps the same two calls.
int uring_setup(unsigned entries, io_uring_params* p) {
  return static_cast<int>(::syscall(__NR_io_uring_setup, entries, p));
}

template <typename T>
T* at(void* base, std::uint32_t off) {
  return reinterpret_cast<T*>(static_cast<std::byte*>(base) + off);
}

}  // namespace

IoUringRing::~IoUringRing() {
  close();
}

bool IoUringRing::open(std::size_t entries, bool cooperative) {
  close();
  io_uring_params p{};
  // SUBMIT_ALL (5.18): one bad SQE does not stop the rest of the batch; COOP_TASKRUN (5.19):
  // no IPI to this thread for completions it waits for anyway. Older kernels: plain setup.
  p.flags = IORING_SETUP_SUBMIT_ALL | (cooperative ? IORING_SETUP_COOP_TASKRUN : 0U);
  int rfd = uring_setup(static_cast<unsigned>(entries), &p);
  if (rfd < 0 && errno == EINVAL) {
    p = io_uring_params{};
    rfd = uring_setup(static_cast<unsigned>(entries), &p);
  }
  if (rfd < 0) return false;  // ENOSYS, EPERM (io_uring_disabled, seccomp), ENOMEM
  fd_.reset(rfd);
  if ((p.features & IORING_FEAT_SINGLE_MMAP) == 0 || (p.features & IORING_FEAT_NODROP) == 0) {
    close();
    return false;
  }
  ring_len_ = std::max<std::size_t>(p.sq_off.array + p.sq_entries * sizeof(std::uint32_t),
                                    p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe));
  void* ring = ::mmap(nullptr, ring_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd,
                      IORING_OFF_SQ_RING);
  if (ring == MAP_FAILED) {
    close();
    return false;
  }
  ring_ = ring;
  sqes_len_ = p.sq_entries * sizeof(io_uring_sqe);
  void* sqes = ::mmap(nullptr, sqes_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd,
                      IORING_OFF_SQES);
  if (sqes == MAP_FAILED) {
    close();
    return false;
  }
  sqes_ = static_cast<io_uring_sqe*>(sqes);
  sq_tail_ = at<std::uint32_t>(ring_, p.sq_off.tail);
  sq_mask_ = *at<std::uint32_t>(ring_, p.sq_off.ring_mask);
  sq_array_ = at<std::uint32_t>(ring_, p.sq_off.array);
  cq_head_ = at<std::uint32_t>(ring_, p.cq_off.head);
  cq_tail_ = at<std::uint32_t>(ring_, p.cq_off.tail);
  cq_mask_ = *at<std::uint32_t>(ring_, p.cq_off.ring_mask);
  cqes_ = at<io_uring_cqe>(ring_, p.cq_off.cqes);
  local_tail_ = *sq_tail_;
  entries_ = p.sq_entries;
  queued_ = 0;
  return true;
}

void IoUringRing::close() {
  if (sqes_ != nullptr) ::munmap(sqes_, sqes_len_);
  if (ring_ != nullptr) ::munmap(ring_, ring_len_);
  sqes_ = nullptr;
  ring_ = nullptr;
  fd_.reset();
  entries_ = 0;
  queued_ = 0;
}

io_uring_sqe* IoUringRing::next_sqe() {
  if (!is_open() || queued_ >= entries_) return nullptr;
  const std::uint32_t idx = local_tail_ & sq_mask_;
  io_uring_sqe* e = &sqes_[idx];
  std::memset(e, 0, sizeof *e);
  sq_array_[idx] = idx;
  ++local_tail_;
  ++queued_;
  return e;
}

std::error_code IoUringRing::enter(std::size_t to_submit, std::size_t min_complete,
                                   std::size_t& taken) {
  // ORDERING: the SQEs written by next_sqe() happen before the kernel sees the new tail
  // (pairs with its acquire load of the SQ tail in io_uring_enter).
  std::atomic_ref(*sq_tail_).store(local_tail_, std::memory_order_release);
  const long rc =
      ::syscall(__NR_io_uring_enter, fd_.get(), static_cast<unsigned>(to_submit),
                static_cast<unsigned>(min_complete), IORING_ENTER_GETEVENTS, nullptr, 0);
  if (rc < 0) return last_errno();
  taken = static_cast<std::size_t>(rc);
  return {};
}

std::uint32_t IoUringRing::cq_tail_acquire() const {
  // ORDERING: pairs with the kernel's release store of the CQ tail after it wrote the CQEs.
  return std::atomic_ref(*cq_tail_).load(std::memory_order_acquire);
}

void IoUringRing::cq_head_release(std::uint32_t head) {
  // ORDERING: our reads of the CQEs happen before the kernel may reuse their slots (pairs
  // with its acquire load of the CQ head).
  std::atomic_ref(*cq_head_).store(head, std::memory_order_release);
}

}  // namespace unetback::net
