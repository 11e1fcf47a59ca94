#include "common/hv/xen/xen_grant_sharer.hpp"

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include <xengnttab.h>
}

#include "common/hv/xen/xen_open_error.hpp"
#include "common/hv/xen/xen_tool_logger.hpp"
#include "common/util/log.hpp"
#include "common/util/result.hpp"

namespace unetback::hv {
namespace {

/// Pages from one xengntshr_share_pages call; unshares them all at once on destruction.
class XenSharedPages final : public SharedPages::Impl {
 public:
  XenSharedPages(xengntshr_handle* handle, std::byte* addr, std::vector<std::uint32_t> refs)
      : handle_(handle), addr_(addr), refs_(std::move(refs)) {}
  ~XenSharedPages() override {
    if (xengntshr_unshare(handle_, addr_, static_cast<std::uint32_t>(refs_.size())) != 0) {
      log::write(log::Level::error, "xen-gntshr",
                 "unshare of " + std::to_string(refs_.size()) +
                     " pages failed: " + last_errno().message());
    }
  }
  XenSharedPages(const XenSharedPages&) = delete;
  XenSharedPages& operator=(const XenSharedPages&) = delete;

  [[nodiscard]] std::size_t count() const override { return refs_.size(); }
  [[nodiscard]] std::byte* page(std::size_t i) const override { return addr_ + i * kPageSize; }
  [[nodiscard]] GrantRef ref(std::size_t i) const override { return GrantRef{refs_.at(i)}; }

 private:
  xengntshr_handle* handle_;
  std::byte* addr_;
  std::vector<std::uint32_t> refs_;
};

}  // namespace

void XenGrantSharer::Closer::operator()(xengntdev_handle* h) const noexcept {
  (void)xengntshr_close(h);
}

XenGrantSharer::XenGrantSharer() : handle_(xengntshr_open(xen_tool_logger(), 0)) {
  if (!handle_) throw SetupError(xen_open_error("grant sharer", "/dev/xen/gntalloc", errno));
}

XenGrantSharer::~XenGrantSharer() = default;

Result<SharedPages> XenGrantSharer::share(DomId peer, std::size_t count, Access access) {
  if (count == 0) return std::errc::invalid_argument;
  std::vector<std::uint32_t> refs(count);
  const int writable = access == Access::read_write ? 1 : 0;
  // gntalloc allocates the pages zeroed, so no stale data of ours reaches the peer.
  void* addr = xengntshr_share_pages(handle_.get(), peer.value(), static_cast<std::uint32_t>(count),
                                     refs.data(), writable);
  if (addr == nullptr) return errno != 0 ? last_errno() : errno_code(EIO);
  return SharedPages(std::make_unique<XenSharedPages>(handle_.get(), static_cast<std::byte*>(addr),
                                                      std::move(refs)));
}

GrantUse XenGrantSharer::in_use(GrantRef /*ref*/) const {
  return GrantUse::unknown;
}

}  // namespace unetback::hv
