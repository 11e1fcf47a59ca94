// A frontend's granted memory for data-path tests without a hypervisor: ref r is page r (mod
// the page count). copy() performs each segment; map() hands out consecutive pages of a private
// window holding copies of the granted ones (enough to see that the backend reads the right
// bytes, with no allocation). `map_spin` makes each map call, `copy_spin_per_kib` each KiB
// copied cost that much time (a busy wait), to stand for a host where that way is dear.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

#include "common/hv/grant_table.hpp"

namespace unetback::test {

struct alignas(4096) Page {
  std::byte bytes[4096];
};

class InMemoryGrantTable final : public hv::BatchingGrantTable {
 public:
  static constexpr std::size_t kPages = 1024;
  static constexpr std::size_t kWindow = 256;

  InMemoryGrantTable()
      : BatchingGrantTable(64), pages_(new Page[kPages]), window_(new Page[kWindow]) {}

  std::byte* page(GrantRef r) { return pages_[r.value() % kPages].bytes; }

  Result<hv::MappedGrants> map(DomId, std::span<const GrantRef> refs, hv::Access a) override {
    if (refs.size() > kWindow) return std::errc::no_buffer_space;
    spin(map_spin);
    for (std::size_t i = 0; i < refs.size(); ++i)
      std::memcpy(window_[i].bytes, page(refs[i]), sizeof(Page));
    ++maps;
    return hv::MappedGrants(this, window_[0].bytes, refs.size(), a);
  }
  void unmap(std::byte*, std::size_t) noexcept override {}

  std::size_t maps = 0;
  std::chrono::microseconds map_spin{0};
  std::chrono::microseconds copy_spin_per_kib{0};

 protected:
  bool copy_call(std::span<hv::GrantCopySegment> segs) noexcept override {
    std::size_t bytes = 0;
    for (const auto& s : segs) bytes += s.len;
    spin(copy_spin_per_kib * static_cast<long>(bytes) / 1024);
    for (auto& s : segs) {
      std::byte* src = s.source.foreign ? page(s.source.ref) + s.source.offset
                                        : static_cast<std::byte*>(s.source.virt);
      std::byte* dst =
          s.dest.foreign ? page(s.dest.ref) + s.dest.offset : static_cast<std::byte*>(s.dest.virt);
      std::memcpy(dst, src, s.len);
      s.status = GNTST_okay;
    }
    return true;
  }

 private:
  static void spin(std::chrono::microseconds d) {
    if (d.count() == 0) return;
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  std::unique_ptr<Page[]> pages_;
  std::unique_ptr<Page[]> window_;
};

}  // namespace unetback::test
