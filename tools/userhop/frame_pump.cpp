#include "tools/userhop/frame_pump.hpp"

#include <cerrno>
#include <unistd.h>

namespace unetback::userhop {

FramePump::FramePump(int from_fd, int to_fd, std::size_t buffer_size)
    : from_(from_fd), to_(to_fd), buf_(buffer_size) {}

PumpStatus FramePump::pump(std::uint32_t budget) noexcept {
  for (std::uint32_t i = 0; i < budget; ++i) {
    const ssize_t n = ::read(from_, buf_.data(), buf_.size());
    if (n < 0) {
      if (errno == EINTR) {
        --i;
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return PumpStatus::drained;
      ++counters_.read_errors;
      error_ = std::error_code(errno, std::generic_category());
      return PumpStatus::failed;
    }
    if (n == 0) return PumpStatus::closed;
    const auto len = static_cast<std::size_t>(n);
    ssize_t w = 0;
    do {
      w = ::write(to_, buf_.data(), len);
    } while (w < 0 && errno == EINTR);
    if (w < 0) {
      // A full destination drops the frame (TCP above recovers, UDP counts it lost): the
      // forwarder must never block one direction on the other.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        ++counters_.write_dropped;
      } else {
        ++counters_.write_errors;
        error_ = std::error_code(errno, std::generic_category());
      }
      continue;
    }
    ++counters_.frames;
    counters_.bytes += len;
  }
  return PumpStatus::more;
}

}  // namespace unetback::userhop
