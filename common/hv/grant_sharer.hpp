// GrantSharer: a frontend grants its own pages to another domain (libxengntshr's role;
// what a guest kernel does with gnttab_grant_foreign_access).
#pragma once

#include <cstddef>
#include <memory>

#include "common/hv/grant_table.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"

namespace unetback::hv {

/// Whether the peer still holds a grant (Xen sets GTF_reading/GTF_writing while it is
/// mapped or being copied). `unknown` where the platform cannot tell (libxengntshr).
enum class GrantUse : std::uint8_t { unused, in_use, unknown };

/// Pages of our own memory, each granted to one peer under its own grant ref.
/// The destructor revokes the grants; a page the peer still holds is not reused before the
/// peer lets it go (Linux gnttab_end_foreign_access semantics). Move-only.
class SharedPages {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;  // revokes
    [[nodiscard]] virtual std::size_t count() const = 0;
    [[nodiscard]] virtual std::byte* page(std::size_t i) const = 0;
    [[nodiscard]] virtual GrantRef ref(std::size_t i) const = 0;
  };

  SharedPages() = default;
  explicit SharedPages(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

  [[nodiscard]] std::size_t count() const { return impl_ ? impl_->count() : 0; }
  [[nodiscard]] std::byte* page(std::size_t i) const { return impl_->page(i); }
  [[nodiscard]] GrantRef ref(std::size_t i) const { return impl_->ref(i); }
  [[nodiscard]] bool empty() const { return count() == 0; }
  void reset() { impl_.reset(); }

 private:
  std::unique_ptr<Impl> impl_;
};

class GrantSharer {
 public:
  virtual ~GrantSharer() = default;

  /// Allocates `count` zeroed pages and grants each to `peer` with `access`.
  virtual Result<SharedPages> share(DomId peer, std::size_t count, Access access) = 0;

  /// Whether `ref` (one of ours) is currently mapped or being copied by its peer.
  [[nodiscard]] virtual GrantUse in_use(GrantRef ref) const = 0;
};

}  // namespace unetback::hv
