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
  if (auto it = pages_.find(domid.value()); it != pages_.end()) return it->second;
  auto m = map_control_page(fd);
  if (!m) return m.error();
  auto page = std::make_shared<MappedRegion>(std::move(*m));
  pages_.emplace(domid.value(), page);
  return page;
}

}  // namespace unetback::hv::sim
