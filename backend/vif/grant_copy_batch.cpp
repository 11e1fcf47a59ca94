#include "backend/vif/grant_copy_batch.hpp"

#include "common/util/result.hpp"

namespace unetback::vif {

GrantCopyBatch::GrantCopyBatch(hv::GrantTable& table, std::size_t capacity)
    : table_(table), capacity_(capacity) {
  if (capacity_ == 0) throw SetupError("copy-batch must be at least 1");
  segments_.reserve(capacity_);
  tags_.reserve(capacity_);
}

}  // namespace unetback::vif
