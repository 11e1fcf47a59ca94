#include "common/hv/sim/sim_grant_sharer.hpp"

#include <cstring>
#include <string>
#include <sys/mman.h>

namespace unetback::hv::sim {

class SimGrantSharer::Pages final : public SharedPages::Impl {
 public:
  Pages(SimGrantSharer& owner, std::vector<Grant> grants)
      : owner_(owner), grants_(std::move(grants)) {}
  ~Pages() override { owner_.release(grants_); }

  [[nodiscard]] std::size_t count() const override { return grants_.size(); }
  [[nodiscard]] std::byte* page(std::size_t i) const override {
    return owner_.memory_.data() + static_cast<std::size_t>(grants_[i].frame) * kPageSize;
  }
  [[nodiscard]] GrantRef ref(std::size_t i) const override { return GrantRef{grants_[i].ref}; }

 private:
  SimGrantSharer& owner_;
  std::vector<Grant> grants_;
};

SimGrantSharer::SimGrantSharer(DomId self, const UniqueFd& memory_fd, std::uint32_t nr_frames,
                               const UniqueFd& grant_fd, std::uint32_t nr_entries)
    : self_(self), nr_frames_(nr_frames), nr_entries_(nr_entries) {
  auto mem = MappedRegion::map_shared(
      memory_fd.get(), static_cast<std::size_t>(nr_frames) * kPageSize, PROT_READ | PROT_WRITE);
  auto gnt = MappedRegion::map_shared(
      grant_fd.get(), static_cast<std::size_t>(nr_entries) * sizeof(SharedGrantEntry),
      PROT_READ | PROT_WRITE);
  if (!mem || !gnt)
    throw SetupError("cannot map the domain's memory or grant table: " +
                     (mem ? gnt.error() : mem.error()).message());
  memory_ = std::move(*mem);
  grants_ = std::move(*gnt);
  // Popped from the back: hand out low frames and refs first, as a guest would.
  for (std::uint32_t f = nr_frames_; f > 0; --f) free_frames_.push_back(f - 1);
  for (std::uint32_t r = nr_entries_; r > kReservedGrantEntries; --r) free_refs_.push_back(r - 1);
}

Result<SharedPages> SimGrantSharer::share(DomId peer, std::size_t count, Access access) {
  if (count == 0) return errno_code(EINVAL);
  std::vector<Grant> grants;
  {
    std::lock_guard lock(mu_);
    if (!deferred_.empty()) retry_deferred_locked();
    if (free_frames_.size() < count || free_refs_.size() < count) return errno_code(ENOSPC);
    grants.reserve(count);
    const std::uint16_t flags =
        GTF_permit_access | (access == Access::read_only ? GTF_readonly : 0);
    for (std::size_t i = 0; i < count; ++i) {
      Grant g{free_refs_.back(), free_frames_.back()};
      free_refs_.pop_back();
      free_frames_.pop_back();
      std::memset(memory_.data() + static_cast<std::size_t>(g.frame) * kPageSize, 0, kPageSize);
      SharedGrantEntry& e = grants_.as<SharedGrantEntry>()[g.ref];
      frame_of(e).store(g.frame, std::memory_order_relaxed);
      // ORDERING: release; pairs with the mapper's acquire load of the word, so a mapper
      // that sees GTF_permit_access also sees the frame (and the zeroed page).
      word_of(e).store(entry_word(flags, peer.value()), std::memory_order_release);
      grants.push_back(g);
    }
  }
  return SharedPages(std::make_unique<Pages>(*this, std::move(grants)));
}

GrantUse SimGrantSharer::in_use(GrantRef ref) const {
  if (ref.value() >= nr_entries_) return GrantUse::unused;
  const std::uint32_t w =
      word_of(grants_.as<SharedGrantEntry>()[ref.value()]).load(std::memory_order_acquire);
  return (entry_flags(w) & (GTF_reading | GTF_writing)) != 0 ? GrantUse::in_use : GrantUse::unused;
}

bool SimGrantSharer::try_revoke(std::uint32_t ref) {
  auto word = word_of(grants_.as<SharedGrantEntry>()[ref]);
  std::uint32_t cur = word.load(std::memory_order_acquire);
  for (;;) {
    if ((entry_flags(cur) & (GTF_reading | GTF_writing)) != 0) return false;
    // ORDERING: acquire on success pairs with the mapper's release clearing of the bits,
    // so its last access to the page happens before we reuse it.
    if (word.compare_exchange_weak(cur, entry_word(0, entry_domid(cur)), std::memory_order_acq_rel,
                                   std::memory_order_acquire))
      return true;
  }
}

void SimGrantSharer::release(const std::vector<Grant>& grants) {
  std::lock_guard lock(mu_);
  for (const Grant& g : grants) {
    if (try_revoke(g.ref)) {
      free_refs_.push_back(g.ref);
      free_frames_.push_back(g.frame);
    } else {
      deferred_.push_back(g);
    }
  }
  if (deferred_.size() > grants.size()) retry_deferred_locked();
}

void SimGrantSharer::retry_deferred_locked() {
  std::erase_if(deferred_, [this](const Grant& g) {
    if (!try_revoke(g.ref)) return false;
    free_refs_.push_back(g.ref);
    free_frames_.push_back(g.frame);
    return true;
  });
}

std::size_t SimGrantSharer::deferred_count() const {
  std::lock_guard lock(mu_);
  return deferred_.size();
}

std::size_t SimGrantSharer::retry_deferred() {
  std::lock_guard lock(mu_);
  retry_deferred_locked();
  return deferred_.size();
}

std::size_t SimGrantSharer::free_frame_count() const {
  std::lock_guard lock(mu_);
  return free_frames_.size();
}

}  // namespace unetback::hv::sim
