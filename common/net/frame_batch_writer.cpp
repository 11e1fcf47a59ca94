#include "common/net/frame_batch_writer.hpp"

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

#include "common/util/result.hpp"

namespace unetback::net {

bool io_uring_wanted() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once; nothing here changes the environment.
  static const bool wanted = std::getenv("UNETBACK_NO_IO_URING") == nullptr;
  return wanted;
}

FrameBatchWriter::FrameBatchWriter(int fd, std::size_t capacity, bool allow_io_uring)
    : fd_(fd), slots_(capacity) {
  if (allow_io_uring && capacity > 0) (void)ring_.open(capacity);
}

FrameBatchWriter::~FrameBatchWriter() = default;

std::error_code FrameBatchWriter::write_now(Slot& s) {
  ++syscalls_;
  if (::writev(fd_, s.iov.data(), s.iovcnt) < 0) return last_errno();
  return {};
}

std::error_code FrameBatchWriter::add(const VirtioNetHdr& hdr, std::span<const iovec> frame) {
  if (frame.size() + 1 > kMaxIov) return std::make_error_code(std::errc::message_size);
  if (queued_ == slots_.size()) slots_.emplace_back();  // a pass larger than the capacity
  Slot& s = slots_[queued_++];
  s.hdr = hdr;
  s.iov[0] = iovec{&s.hdr, kVnetHdrLen};
  std::copy(frame.begin(), frame.end(), s.iov.begin() + 1);
  s.iovcnt = static_cast<int>(frame.size() + 1);
  s.written = mode() == Mode::writev;
  if (s.written) {
    s.result = write_now(s);
  } else if (++unsubmitted_ == ring_.entries()) {
    submit();  // the ring is full: these go now, the later ones after them
  }
  return {};
}

void FrameBatchWriter::submit() {
  const std::size_t first = queued_ - unsubmitted_;
  unsubmitted_ = 0;
  for (std::size_t i = first; i < queued_; ++i) {
    io_uring_sqe* e = ring_.next_sqe();          // there is one: at most entries() unsubmitted
    slots_[i].iov[0].iov_base = &slots_[i].hdr;  // slots_ may have moved since add()
    e->opcode = IORING_OP_WRITEV;
    e->fd = fd_;
    e->addr = reinterpret_cast<std::uint64_t>(slots_[i].iov.data());
    e->len = static_cast<std::uint32_t>(slots_[i].iovcnt);
    e->off = static_cast<std::uint64_t>(-1);  // the fd's position: a TAP has none
    e->user_data = i;
  }
  std::size_t calls = 0, not_taken = 0;
  const auto ec = ring_.submit_and_wait(
      [&](std::uint64_t i, std::int32_t res) {
        if (i >= queued_) return;
        slots_[i].written = true;
        slots_[i].result = res < 0 ? errno_code(-res) : std::error_code{};
      },
      calls, not_taken);
  syscalls_ += calls;
  if (ec) {
    // io_uring_enter itself failed (not one write): the writer drops to writev for good (the
    // ring is closed); the SQEs it did not take, the last ones, are written the plain way.
    for (std::size_t i = queued_ - not_taken; i < queued_; ++i) {
      slots_[i].written = true;
      slots_[i].result = write_now(slots_[i]);
    }
  }
}

void FrameBatchWriter::flush(std::span<std::error_code> results) {
  if (unsubmitted_ != 0) submit();
  for (std::size_t i = 0; i < queued_ && i < results.size(); ++i) results[i] = slots_[i].result;
  queued_ = 0;
}

}  // namespace unetback::net
