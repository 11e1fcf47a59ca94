#include "common/net/frame_batch_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <sys/uio.h>
#include <unistd.h>

namespace unetback::net {
namespace {

/// user_data of a cancel request: apart from the reads' (their index in the batch).
constexpr std::uint64_t kCancelTag = std::uint64_t{1} << 63;

}  // namespace

FrameBatchReader::FrameBatchReader(int fd, std::size_t capacity, bool allow_io_uring, bool nowait)
    : fd_(fd), capacity_(std::max<std::size_t>(capacity, 1)), nowait_(nowait), done_(capacity_) {
  if (allow_io_uring && capacity > 0) (void)ring_.open(capacity_);
}

FrameBatchReader::~FrameBatchReader() = default;

std::size_t FrameBatchReader::read(std::span<const std::span<std::byte>> bufs,
                                   std::span<std::size_t> sizes) {
  const std::size_t n = std::min(bufs.size(), sizes.size());
  if (n == 0) return 0;
  if (mode() == Mode::io_uring) return read_uring(bufs.first(n), sizes.first(n));
  return read_plain(bufs.first(n), sizes.first(n));
}

std::size_t FrameBatchReader::read_plain(std::span<const std::span<std::byte>> bufs,
                                         std::span<std::size_t> sizes) {
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    ++syscalls_;
    const ssize_t r = ::read(fd_, bufs[i].data(), bufs[i].size());
    if (r <= 0) {
      sizes[i] = 0;  // EAGAIN (drained), an empty read or an error: the batch ends here
      return i + 1;
    }
    sizes[i] = static_cast<std::size_t>(r);
  }
  return bufs.size();
}

std::size_t FrameBatchReader::read_uring(std::span<const std::span<std::byte>> bufs,
                                         std::span<std::size_t> sizes) {
  const std::size_t n = std::min(bufs.size(), capacity_);
  for (std::size_t i = 0; i < n; ++i) {
    io_uring_sqe* e = ring_.next_sqe();  // there is one: the ring has capacity_ entries
    e->opcode = IORING_OP_READ;
    e->fd = fd_;
    e->addr = reinterpret_cast<std::uint64_t>(bufs[i].data());
    e->len = static_cast<std::uint32_t>(bufs[i].size());
    e->off = static_cast<std::uint64_t>(-1);  // the fd's position: a TAP has none
    // RWF_NOWAIT: answer EAGAIN when there is nothing to read. O_NONBLOCK alone does not do
    // it: io_uring parks a read on a non-blocking fd that supports polling until data comes
    // (Linux >= 6.0, and 6.1's io_rw_init_file says so), which would hold this thread.
    if (nowait_) e->rw_flags = RWF_NOWAIT;
    e->user_data = i;
    sizes[i] = 0;
    done_[i] = false;
  }
  std::size_t completed = 0, calls = 0;
  bool refused = false;
  const auto on_cqe = [&](std::uint64_t tag, std::int32_t res) {
    if ((tag & kCancelTag) != 0 || tag >= n || done_[tag]) return;
    done_[tag] = true;
    ++completed;
    sizes[tag] = res > 0 ? static_cast<std::size_t>(res) : 0;
    // A file that cannot take RWF_NOWAIT reads (no FMODE_NOWAIT) refuses each one.
    if (res == -EOPNOTSUPP || res == -EINVAL) refused = true;
  };
  // No wait: a read of a non-blocking fd completes inside the call that submits it.
  const auto ec = ring_.submit_and_reap(0, on_cqe, calls);
  syscalls_ += calls;
  if (ec || completed != n) {
    give_up_ring(n, sizes);
  } else if (refused) {
    // Nothing was read by the refused reads, and none can be: read() from now on, starting
    // with this batch's remaining buffers (those before the first refusal hold frames).
    refused_ = true;
    ring_.close();
    std::size_t first = 0;
    while (first < n && sizes[first] != 0) ++first;
    return first + read_plain(bufs.subspan(first, n - first), sizes.subspan(first, n - first));
  }
  return n;
}

void FrameBatchReader::give_up_ring(std::size_t n, std::span<std::size_t> sizes) {
  std::size_t missing = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (done_[i]) continue;
    ++missing;
    io_uring_sqe* e = ring_.next_sqe();
    if (e == nullptr) break;
    e->opcode = IORING_OP_ASYNC_CANCEL;
    e->addr = i;  // the user_data of the read to cancel
    e->user_data = kCancelTag | i;
  }
  parked_ += missing;
  std::size_t calls = 0;
  // Each parked read completes (cancelled, or with a frame that came meanwhile) before its
  // buffer may be reused: wait for every one of them.
  while (missing != 0 && ring_.is_open()) {
    std::size_t got = 0;
    const auto ec = ring_.submit_and_reap(
        1,
        [&](std::uint64_t tag, std::int32_t res) {
          if ((tag & kCancelTag) != 0 || tag >= n || done_[tag]) return;
          done_[tag] = true;
          sizes[tag] = res > 0 ? static_cast<std::size_t>(res) : 0;
          ++got;
        },
        calls);
    if (ec) break;
    missing -= std::min(missing, got);
  }
  syscalls_ += calls;
  // If io_uring_enter itself failed above, closing the ring makes the kernel cancel what is
  // left as it tears the ring down.
  ring_.close();
}

}  // namespace unetback::net
