// GrantCopyBatch: grant-copy segments gathered across packets and issued together
// (netback's rx_copy.op[] + xenvif_rx_copy_flush; docs/design.md, "Conventions").
//
// Each segment carries a caller-chosen tag (on guest-RX: the ring index of the response
// the segment fills). flush() issues one GrantTable::copy for everything queued — which the
// table splits into calls of its configured batch size — and reports every failed segment
// with its tag and GNTST_* status, so the caller can turn that response into an error.
#pragma once

#include <cstdint>
#include <vector>

#include "common/hv/grant_table.hpp"

namespace unetback::vif {

class GrantCopyBatch {
 public:
  /// `capacity`: segments queued before the caller must flush (the copy-batch tunable).
  GrantCopyBatch(hv::GrantTable& table, std::size_t capacity);

  [[nodiscard]] std::size_t size() const { return segments_.size(); }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  [[nodiscard]] std::size_t room() const { return capacity_ - segments_.size(); }
  [[nodiscard]] bool empty() const { return segments_.empty(); }

  /// Queues one segment. The caller keeps size() <= capacity() (check room() first).
  void add(const hv::GrantCopySegment& segment, std::uint32_t tag) {
    segments_.push_back(segment);
    tags_.push_back(tag);
  }

  /// Copies everything queued; calls on_fail(tag, status) for each segment that failed, in
  /// queue order; then empties the batch. Returns the number of failed segments.
  template <typename OnFail>
  std::size_t flush(OnFail&& on_fail) {
    if (segments_.empty()) return 0;
    table_.copy(segments_);
    std::size_t failed = 0;
    for (std::size_t i = 0; i < segments_.size(); ++i) {
      if (segments_[i].status != 0) {
        ++failed;
        on_fail(tags_[i], segments_[i].status);
      }
    }
    segments_.clear();
    tags_.clear();
    return failed;
  }

 private:
  hv::GrantTable& table_;
  std::size_t capacity_;
  std::vector<hv::GrantCopySegment> segments_;
  std::vector<std::uint32_t> tags_;
};

}  // namespace unetback::vif
