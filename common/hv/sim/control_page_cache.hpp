// ControlPageCache: the control pages (domain_control.hpp) of the domains this process
// sends events to, mapped once per domain and shared by every SimEventChannel of one
// SimHypervisor. xensim never reuses a domid, so a domid names one page for ever. A page
// stays mapped while some port uses it (the cache holds it weakly): a daemon serving
// short-lived guests keeps no mapping of the guests that are gone.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/hv/sim/domain_control.hpp"
#include "common/hv/sim/mapped_region.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::hv::sim {

class ControlPageCache {
 public:
  /// The page of `domid`, mapping `fd` (as the broker sent it) the first time.
  Result<std::shared_ptr<MappedRegion>> get(DomId domid, const UniqueFd& fd);

 private:
  std::mutex mu_;
  std::unordered_map<std::uint16_t, std::weak_ptr<MappedRegion>> pages_;
};

/// Maps one control page (read-write: senders update fault-injection state in it).
Result<MappedRegion> map_control_page(const UniqueFd& fd);

}  // namespace unetback::hv::sim
