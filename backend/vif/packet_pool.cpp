#include "backend/vif/packet_pool.hpp"

#include <sys/mman.h>

#include "common/util/result.hpp"

namespace unetback::vif {

PacketPool::PacketPool(std::size_t count) : count_(count) {
  void* p = ::mmap(nullptr, count * kBufferSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const auto ec = last_errno();
    throw SetupError("packet pool: mmap failed: " + ec.message(), ec);
  }
  base_ = static_cast<std::byte*>(p);
  free_.reserve(count);
  for (std::size_t i = count; i-- > 0;) free_.push_back(static_cast<int>(i));
}

PacketPool::~PacketPool() {
  ::munmap(base_, count_ * kBufferSize);
}

}  // namespace unetback::vif
