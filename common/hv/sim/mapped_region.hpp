// MappedRegion: sole owner of an mmap()ed range. The destructor munmaps it.
#pragma once

#include <cstddef>
#include <utility>

#include "common/util/result.hpp"

namespace unetback::hv::sim {

class MappedRegion {
 public:
  MappedRegion() = default;
  ~MappedRegion() { reset(); }
  MappedRegion(MappedRegion&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  MappedRegion& operator=(MappedRegion&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      len_ = std::exchange(o.len_, 0);
    }
    return *this;
  }
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  /// Maps `len` bytes of `fd` from offset 0, MAP_SHARED, with `prot`.
  static Result<MappedRegion> map_shared(int fd, std::size_t len, int prot);
  /// Reserves `len` bytes of address space (PROT_NONE), to be filled with MAP_FIXED.
  static Result<MappedRegion> reserve(std::size_t len);

  [[nodiscard]] std::byte* data() const { return addr_; }
  [[nodiscard]] std::size_t size() const { return len_; }
  [[nodiscard]] bool empty() const { return addr_ == nullptr; }
  template <typename T>
  [[nodiscard]] T* as() const {
    return reinterpret_cast<T*>(addr_);
  }

  /// Gives up ownership (the caller munmaps).
  std::byte* release() {
    len_ = 0;
    return std::exchange(addr_, nullptr);
  }
  void reset();

 private:
  MappedRegion(std::byte* addr, std::size_t len) : addr_(addr), len_(len) {}
  std::byte* addr_ = nullptr;
  std::size_t len_ = 0;
};

}  // namespace unetback::hv::sim
