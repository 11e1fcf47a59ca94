#include "common/hv/sim/mapped_region.hpp"

#include <sys/mman.h>

namespace unetback::hv::sim {

Result<MappedRegion> MappedRegion::map_shared(int fd, std::size_t len, int prot) {
  if (len == 0) return errno_code(EINVAL);
  void* p = ::mmap(nullptr, len, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return last_errno();
  return MappedRegion(static_cast<std::byte*>(p), len);
}

Result<MappedRegion> MappedRegion::reserve(std::size_t len) {
  if (len == 0) return errno_code(EINVAL);
  void* p = ::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return last_errno();
  return MappedRegion(static_cast<std::byte*>(p), len);
}

void MappedRegion::reset() {
  if (addr_ != nullptr) ::munmap(addr_, len_);
  addr_ = nullptr;
  len_ = 0;
}

}  // namespace unetback::hv::sim
