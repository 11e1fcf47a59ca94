#include "backend/vif/hash_control.hpp"

#include <algorithm>
#include <cstring>

#include "common/wire/xen_headers.hpp"

namespace unetback::vif {

using wire::CtrlStatus;

HashControl::HashControl(hv::GrantTable& table, DomId frontend, std::uint32_t num_queues,
                         std::shared_ptr<SharedHashSettings> publish)
    : table_(table), frontend_(frontend), publish_(std::move(publish)) {
  HashSettings s;
  s.num_queues = std::max<std::uint32_t>(1, num_queues);
  current_ = std::make_shared<const HashSettings>(std::move(s));
  if (publish_) publish_->publish(current_);
}

wire::CtrlResponse HashControl::handle(const wire::CtrlRequest& req) {
  wire::CtrlResponse rsp{};
  rsp.id = req.id;
  rsp.type = req.type;
  rsp.data = 0;
  CtrlStatus st = CtrlStatus::not_supported;
  switch (static_cast<wire::CtrlType>(req.type)) {
    case wire::CtrlType::set_hash_algorithm: st = set_algorithm(req.data[0]); break;
    case wire::CtrlType::get_hash_flags: st = get_flags(rsp.data); break;
    case wire::CtrlType::set_hash_flags: st = set_flags(req.data[0]); break;
    case wire::CtrlType::set_hash_key: st = set_key(GrantRef{req.data[0]}, req.data[1]); break;
    case wire::CtrlType::get_hash_mapping_size:
      rsp.data = kHashMappingMax;
      st = CtrlStatus::success;
      break;
    case wire::CtrlType::set_hash_mapping_size: st = set_mapping_size(req.data[0]); break;
    case wire::CtrlType::set_hash_mapping:
      st = set_mapping(GrantRef{req.data[0]}, req.data[1], req.data[2]);
      break;
    default: break;  // type 0, the staging-grant ops, anything newer: not served
  }
  rsp.status = static_cast<std::uint32_t>(st);
  return rsp;
}

void HashControl::commit(HashSettings next) {
  current_ = std::make_shared<const HashSettings>(std::move(next));
  if (publish_) publish_->publish(current_);
}

CtrlStatus HashControl::set_algorithm(std::uint32_t alg) {
  if (alg != static_cast<std::uint32_t>(wire::HashAlgorithm::none) &&
      alg != static_cast<std::uint32_t>(wire::HashAlgorithm::toeplitz))
    return CtrlStatus::invalid_parameter;
  HashSettings next = *current_;
  next.toeplitz = alg == static_cast<std::uint32_t>(wire::HashAlgorithm::toeplitz);
  commit(std::move(next));
  return CtrlStatus::success;
}

CtrlStatus HashControl::get_flags(std::uint32_t& out) const {
  if (!current_->toeplitz) return CtrlStatus::not_supported;
  out = wire::kHashTypesAll;
  return CtrlStatus::success;
}

CtrlStatus HashControl::set_flags(std::uint32_t flags) {
  if ((flags & ~wire::kHashTypesAll) != 0) return CtrlStatus::invalid_parameter;
  if (!current_->toeplitz) return CtrlStatus::not_supported;
  HashSettings next = *current_;
  next.flags = flags;
  commit(std::move(next));
  return CtrlStatus::success;
}

CtrlStatus HashControl::set_key(GrantRef gref, std::uint32_t len) {
  if (len > kHashKeyMax) return CtrlStatus::invalid_parameter;
  key_buf_.fill(0);
  if (len != 0) {
    // netif.h: the key starts at the beginning of the grant; read-only grants are fine.
    hv::GrantCopySegment seg;
    seg.source = hv::GrantCopyPtr::granted(frontend_, gref, 0);
    seg.dest = hv::GrantCopyPtr::local(key_buf_.data());
    seg.len = static_cast<std::uint16_t>(len);
    table_.copy(std::span(&seg, 1));
    if (seg.status != GNTST_okay) return CtrlStatus::invalid_parameter;
  }
  HashSettings next = *current_;
  std::copy_n(key_buf_.begin(), kHashKeyMax, next.key.begin());
  commit(std::move(next));
  return CtrlStatus::success;
}

CtrlStatus HashControl::set_mapping_size(std::uint32_t size) {
  if (size > kHashMappingMax) return CtrlStatus::invalid_parameter;
  HashSettings next = *current_;
  next.mapping.assign(size, 0);  // "any new table is assumed to be zero filled"
  commit(std::move(next));
  return CtrlStatus::success;
}

CtrlStatus HashControl::set_mapping(GrantRef gref, std::uint32_t len, std::uint32_t off) {
  const auto size = static_cast<std::uint32_t>(current_->mapping.size());
  // XSA-270: off + len computed without wrapping, inside the table the frontend sized.
  if (off > size || len > size - off) return CtrlStatus::invalid_parameter;
  // The shadow: the current table, with the new sub-table copied over it.
  std::copy(current_->mapping.begin(), current_->mapping.end(), mapping_buf_.begin());
  if (len != 0) {
    hv::GrantCopySegment seg;
    seg.source = hv::GrantCopyPtr::granted(frontend_, gref, 0);
    seg.dest = hv::GrantCopyPtr::local(mapping_buf_.data() + off);
    seg.len = static_cast<std::uint16_t>(len * sizeof(std::uint32_t));
    table_.copy(std::span(&seg, 1));
    if (seg.status != GNTST_okay) return CtrlStatus::invalid_parameter;
  }
  for (std::uint32_t i = off; i < off + len; ++i)
    if (mapping_buf_[i] >= current_->num_queues) return CtrlStatus::invalid_parameter;
  HashSettings next = *current_;
  std::copy_n(mapping_buf_.begin(), size, next.mapping.begin());
  commit(std::move(next));
  return CtrlStatus::success;
}

}  // namespace unetback::vif
