#include "common/net/frame_posted_reader.hpp"

#include <algorithm>

namespace unetback::net {

FramePostedReader::FramePostedReader(int fd, std::size_t depth)
    : fd_(fd), depth_(std::max<std::size_t>(depth, 1)) {
  pending_.reserve(depth_);
  // Not cooperative: completions of parked reads must run while the thread sleeps in its
  // epoll_wait (the task work interrupts it), or the ring's fd would never turn readable.
  // Room for the reads and the one cancel of cancel_all().
  (void)ring_.open(depth_ + 1, /*cooperative=*/false);
}

FramePostedReader::~FramePostedReader() {
  // The owner cancelled (cancel_all) before it let go of the buffers; what is left here is
  // only a ring with nothing in flight.
  ring_.close();
}

bool FramePostedReader::post(std::span<std::byte> buf, std::uint32_t tag) {
  if (pending_.size() >= depth_) return false;
  io_uring_sqe* e = ring_.next_sqe();
  if (e == nullptr) return false;
  e->opcode = IORING_OP_READ;
  e->fd = fd_;
  e->addr = reinterpret_cast<std::uint64_t>(buf.data());
  e->len = static_cast<std::uint32_t>(buf.size());
  e->off = static_cast<std::uint64_t>(-1);  // the fd's position: a TAP has none
  e->user_data = tag;
  // Each read after the previous one of the batch (see the header: one parked read at a time).
  if (chain_tail_ != nullptr) chain_tail_->flags |= IOSQE_IO_HARDLINK;
  chain_tail_ = e;
  pending_.push_back(tag);
  ++queued_;
  return true;
}

}  // namespace unetback::net
