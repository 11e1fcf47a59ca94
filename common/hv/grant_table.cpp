#include "common/hv/grant_table.hpp"

#include <algorithm>
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
  }
  return *this;
}

void MappedGrants::reset() {
  if (owner_ != nullptr && count_ != 0) owner_->unmap(addr_, count_);
  owner_ = nullptr;
  addr_ = nullptr;
  count_ = 0;
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
    failed_ += static_cast<std::uint64_t>(std::count_if(
        call.begin(), call.end(), [](const auto& s) { return s.status != GNTST_okay; }));
    segments = segments.subspan(n);
  }
}

GrantCopyStats BatchingGrantTable::copy_stats() const {
  return {calls_, segments_, failed_};
}

}  // namespace unetback::hv
