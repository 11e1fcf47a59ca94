#include "common/hv/grant_table.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>

#include "common/wire/grant.hpp"

namespace unetback::hv {

MappedGrants& MappedGrants::operator=(MappedGrants&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    addr_ = std::exchange(o.addr_, nullptr);
    count_ = std::exchange(o.count_, 0);
    access_ = o.access_;
    pages_ = std::move(o.pages_);
    o.pages_.clear();
  }
  return *this;
}

namespace {
std::atomic<std::size_t> g_mapped_pages{0};
}  // namespace

std::size_t mapped_grant_pages() {
  return g_mapped_pages.load(std::memory_order_relaxed);
}

void MappedGrants::count_mapped(std::ptrdiff_t pages) {
  g_mapped_pages.fetch_add(static_cast<std::size_t>(pages), std::memory_order_relaxed);
}

void MappedGrants::reset() {
  if (owner_ != nullptr && count_ != 0) {
    owner_->unmap(addr_, count_);
    count_mapped(-static_cast<std::ptrdiff_t>(count_));
  }
  owner_ = nullptr;
  addr_ = nullptr;
  count_ = 0;
  pages_.clear();
}

std::size_t gntdev_ops(const GrantCopySegment& segment) {
  const GrantCopyPtr* local = !segment.source.foreign ? &segment.source
                              : !segment.dest.foreign ? &segment.dest
                                                      : nullptr;
  if (local == nullptr || segment.len == 0) return 1;
  const auto first = reinterpret_cast<std::uintptr_t>(local->virt);
  const std::uintptr_t last = first + segment.len - 1;
  return static_cast<std::size_t>(last / kPageSize - first / kPageSize + 1);
}

BatchingGrantTable::BatchingGrantTable(std::size_t max_segments_per_call)
    : max_per_call_(max_segments_per_call) {
  if (max_per_call_ == 0) throw SetupError("grant copy batch size must be at least 1");
}

void BatchingGrantTable::copy(std::span<GrantCopySegment> segments) {
  while (!segments.empty()) {
    const std::size_t n = std::min(segments.size(), max_per_call_);
    const auto call = segments.first(n);
    if (!copy_call(call)) {
      for (auto& s : call) s.status = GNTST_general_error;
    }
    ++calls_;
    segments_ += n;
    std::size_t ops = 0;
    for (const auto& seg : call) ops += gntdev_ops(seg);
    ops_ += ops;
    hypercalls_ += (ops + kGntdevOpsPerHypercall - 1) / kGntdevOpsPerHypercall;
    failed_ += static_cast<std::uint64_t>(std::count_if(
        call.begin(), call.end(), [](const auto& s) { return s.status != GNTST_okay; }));
    segments = segments.subspan(n);
  }
}

GrantCopyStats BatchingGrantTable::copy_stats() const {
  return {calls_, segments_, failed_, ops_, hypercalls_};
}

}  // namespace unetback::hv
