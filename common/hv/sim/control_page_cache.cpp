#include "common/hv/sim/control_page_cache.hpp"

#include <sys/mman.h>

namespace unetback::hv::sim {

Result<MappedRegion> map_control_page(const UniqueFd& fd) {
  auto m = MappedRegion::map_shared(fd.get(), kDomainControlSize, PROT_READ | PROT_WRITE);
  if (!m) return m.error();
  if (m->as<DomainControl>()->magic != kControlMagic) return errno_code(EPROTO);
  return m;
}

Result<std::shared_ptr<MappedRegion>> ControlPageCache::get(DomId domid, const UniqueFd& fd) {
  std::lock_guard lock(mu_);
  if (auto it = pages_.find(domid.value()); it != pages_.end()) {
    if (auto page = it->second.lock()) return page;
  }
  // Forget the pages nobody uses any more (their mappings went with the last user).
  std::erase_if(pages_, [](const auto& kv) { return kv.second.expired(); });
  auto m = map_control_page(fd);
  if (!m) return m.error();
  auto page = std::make_shared<MappedRegion>(std::move(*m));
  pages_.insert_or_assign(domid.value(), page);
  return page;
}

}  // namespace unetback::hv::sim
