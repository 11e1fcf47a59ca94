// A frontend's granted memory for data-path tests without a hypervisor: ref r is page r (mod
// the page count). copy() performs each segment; map() hands out consecutive pages of a private
// window holding copies of the granted ones (enough to see that the backend reads the right
// bytes, with no allocation). `map_cost` makes each map call, `copy_cost_per_kib` each KiB
// copied cost that much time on the table's own clock (now(), which only these costs move), to
// stand for a host where that way is dear. A test hands now() to the code that times itself, so
// that the costs it sees do not depend on how loaded the machine running the test is.
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
    elapsed_ += map_cost;
    for (std::size_t i = 0; i < refs.size(); ++i)
      std::memcpy(window_[i].bytes, page(refs[i]), sizeof(Page));
    ++maps;
    return hv::MappedGrants(this, window_[0].bytes, refs.size(), a);
  }
  void unmap(std::byte*, std::size_t) noexcept override {}

  std::size_t maps = 0;
  std::chrono::microseconds map_cost{0};
  std::chrono::microseconds copy_cost_per_kib{0};

  /// The table's clock: it stands still but for the costs above.
  [[nodiscard]] std::chrono::steady_clock::time_point now() const {
    return std::chrono::steady_clock::time_point{} + elapsed_;
  }

 protected:
  bool copy_call(std::span<hv::GrantCopySegment> segs) noexcept override {
    std::size_t bytes = 0;
    for (const auto& s : segs) bytes += s.len;
    elapsed_ += copy_cost_per_kib * static_cast<long>(bytes) / 1024;
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
  std::chrono::nanoseconds elapsed_{0};
  std::unique_ptr<Page[]> pages_;
  std::unique_ptr<Page[]> window_;
};

}  // namespace unetback::test
