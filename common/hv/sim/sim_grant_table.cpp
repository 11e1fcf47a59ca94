#include "common/hv/sim/sim_grant_table.hpp"

#include <cstring>
#include <sys/mman.h>

#include "common/hv/sim/domain_control.hpp"
#include "common/wire/grant.hpp"

namespace unetback::hv::sim {

namespace {

// Xen gives up on an entry whose flags keep changing under its cmpxchg ("unstable
// entry"); a guest flipping flags in a loop must not keep the backend spinning.
constexpr int kMaxCasAttempts = 16;

constexpr std::uint16_t kReading = GTF_reading;
constexpr std::uint16_t kWriting = GTF_writing;

std::error_code map_error_of(std::int16_t status) {
  switch (status) {
    case GNTST_bad_domain: return errno_code(ESRCH);
    case GNTST_bad_gntref: return errno_code(EINVAL);
    case GNTST_permission_denied: return errno_code(EPERM);
    case GNTST_bad_page: return errno_code(EFAULT);
    default: return errno_code(EIO);
  }
}

}  // namespace

struct SimGrantTable::DomainView {
  DomId domid;
  UniqueFd memory_fd;
  MappedRegion memory, grants, control;
  std::uint32_t nr_frames = 0;
  std::uint32_t nr_entries = 0;
  // Our holds per entry, in the broker's pin table (it releases them if we die).
  MappedRegion pin_table;
  GrantPins* pins = nullptr;

  [[nodiscard]] bool dead() const {
    // ORDERING: pairs with the broker's release store of `dead` when it releases the domain.
    return shared_u32(control.as<DomainControl>()->dead).load(std::memory_order_acquire) != 0;
  }
  [[nodiscard]] SharedGrantEntry& entry(std::uint32_t ref) const {
    return grants.as<SharedGrantEntry>()[ref];
  }
  [[nodiscard]] std::byte* frame(std::uint32_t f) const {
    return memory.data() + static_cast<std::size_t>(f) * kPageSize;
  }
};

struct SimGrantTable::MapRecord {
  std::shared_ptr<DomainView> view;
  std::vector<GrantRef> refs;
  bool write = false;
};

/// One segment's pins, released after its copy.
struct SimGrantTable::Resolved {
  std::byte* src = nullptr;
  std::byte* dst = nullptr;
  DomainView* src_view = nullptr;
  DomainView* dst_view = nullptr;
  GrantRef src_ref{}, dst_ref{};
  std::vector<std::shared_ptr<DomainView>>* keep = nullptr;
};

SimGrantTable::SimGrantTable(BrokerClient& broker, DomId self, std::size_t max_segments_per_call)
    : BatchingGrantTable(max_segments_per_call), broker_(broker), self_(self) {
  scratch_.resize(max_segments_per_call);
}

SimGrantTable::~SimGrantTable() {
  std::vector<std::pair<std::byte*, std::size_t>> left;
  {
    std::lock_guard lock(mu_);
    for (const auto& [addr, rec] : maps_) left.emplace_back(addr, rec->refs.size());
  }
  for (const auto& [addr, n] : left) unmap(addr, n);
}

Result<std::shared_ptr<SimGrantTable::DomainView>> SimGrantTable::view_for(DomId domid) {
  const auto gone = errno_code(ESRCH);
  if (auto it = views_.find(domid.value()); it != views_.end()) {
    if (!it->second->dead()) return it->second;
    // Mappings still hold the view; the cache lets go so copies see GNTST_bad_domain.
    views_.erase(it);
    dead_.insert(domid.value());
    return gone;
  }
  if (dead_.contains(domid.value())) return gone;
  auto req = make_request(BrokerOp::get_domain_memory);
  req.domid = domid.value();
  auto resp = broker_.call(req);
  if (!resp) return resp.error();  // the broker's ESRCH, or ours: EMFILE receiving the fds
  if (resp->fds.size() != 4) return errno_code(EPROTO);
  auto v = std::make_shared<DomainView>();
  v->domid = domid;
  v->nr_frames = resp->reply.nr_frames;
  v->nr_entries = resp->reply.nr_grant_entries;
  auto mem = MappedRegion::map_shared(resp->fds[0].get(),
                                      static_cast<std::size_t>(v->nr_frames) * kPageSize,
                                      PROT_READ | PROT_WRITE);
  auto gnt = MappedRegion::map_shared(
      resp->fds[1].get(), static_cast<std::size_t>(v->nr_entries) * sizeof(SharedGrantEntry),
      PROT_READ | PROT_WRITE);
  auto ctl =
      MappedRegion::map_shared(resp->fds[2].get(), kDomainControlSize, PROT_READ | PROT_WRITE);
  auto pins = MappedRegion::map_shared(resp->fds[3].get(),
                                       static_cast<std::size_t>(v->nr_entries) * sizeof(GrantPins),
                                       PROT_READ | PROT_WRITE);
  if (!mem) return mem.error();
  if (!gnt) return gnt.error();
  if (!ctl) return ctl.error();
  if (!pins) return pins.error();
  v->memory_fd = std::move(resp->fds[0]);
  v->memory = std::move(*mem);
  v->grants = std::move(*gnt);
  v->control = std::move(*ctl);
  v->pin_table = std::move(*pins);
  v->pins = v->pin_table.as<GrantPins>();
  if (v->dead()) return gone;
  views_.emplace(domid.value(), v);
  return v;
}

std::int16_t SimGrantTable::pin(DomainView& v, GrantRef ref, bool write, std::uint32_t& frame) {
  if (ref.value() >= v.nr_entries) return GNTST_bad_gntref;
  SharedGrantEntry& e = v.entry(ref.value());
  auto word = word_of(e);
  // ORDERING: acquire pairs with the granter's release store of the word, which it makes
  // after writing `frame`; so the frame read below is the one granted.
  std::uint32_t cur = word.load(std::memory_order_acquire);
  for (int attempt = 0;; ++attempt) {
    const std::uint16_t flags = entry_flags(cur);
    if ((flags & wire::kGtfTypeMask) != GTF_permit_access) return GNTST_bad_gntref;
    if (entry_domid(cur) != self_.value()) return GNTST_permission_denied;
    if (write && (flags & GTF_readonly) != 0) return GNTST_permission_denied;
    const std::uint16_t want = flags | kReading | (write ? kWriting : 0);
    if (want == flags) break;
    if (word.compare_exchange_weak(cur, entry_word(want, entry_domid(cur)),
                                   std::memory_order_acq_rel, std::memory_order_acquire))
      break;
    if (attempt == kMaxCasAttempts) return GNTST_general_error;
  }
  // The granter may not change the frame while GTF_reading is set; a hostile one might,
  // so the frame is read once and bounds-checked here, after the bits are set.
  frame = frame_of(e).load(std::memory_order_relaxed);
  auto& p = v.pins[ref.value()];
  if (frame >= v.nr_frames) {
    const std::uint16_t undo =
        (p.users == 0 ? kReading : 0) | (write && p.writers == 0 ? kWriting : 0);
    word.fetch_and(~static_cast<std::uint32_t>(undo), std::memory_order_release);
    return GNTST_bad_page;
  }
  ++p.users;
  if (write) ++p.writers;
  return GNTST_okay;
}

void SimGrantTable::unpin(DomainView& v, GrantRef ref, bool write) {
  auto& p = v.pins[ref.value()];
  --p.users;
  if (write) --p.writers;
  const std::uint16_t clear =
      (p.users == 0 ? kReading : 0) | (write && p.writers == 0 ? kWriting : 0);
  // ORDERING: release, so our accesses to the frame happen before the granter can see the
  // bits clear and reuse the page (its revoking CAS is acquire).
  if (clear != 0) {
    word_of(v.entry(ref.value()))
        .fetch_and(~static_cast<std::uint32_t>(clear), std::memory_order_release);
  }
}

std::int16_t SimGrantTable::resolve_side(const GrantCopyPtr& side, std::uint16_t len, bool write,
                                         Resolved& r, std::byte*& addr) {
  if (!side.foreign) {
    if (side.virt == nullptr) return GNTST_bad_virt_addr;
    addr = static_cast<std::byte*>(side.virt);
    return GNTST_okay;
  }
  auto found = view_for(side.domid);
  // A domain we cannot see for want of resources is no bad domain: the copy just failed.
  if (!found)
    return found.error() == std::errc::no_such_process ? GNTST_bad_domain : GNTST_general_error;
  auto view = std::move(*found);
  if (static_cast<std::size_t>(side.offset) + len > kPageSize) return GNTST_bad_copy_arg;
  std::uint32_t frame = 0;
  const std::int16_t st = pin(*view, side.ref, write, frame);
  if (st != GNTST_okay) return st;
  addr = view->frame(frame) + side.offset;
  if (write) {
    r.dst_view = view.get();
    r.dst_ref = side.ref;
  } else {
    r.src_view = view.get();
    r.src_ref = side.ref;
  }
  // The cache may drop the view (its domain died) before this call's copies finish.
  if (r.keep->empty() || r.keep->back() != view) r.keep->push_back(std::move(view));
  return GNTST_okay;
}

// Only std::bad_alloc (the view cache, the keep list) can escape: running out of memory in the
// data path terminates, by design.
// NOLINTNEXTLINE(bugprone-exception-escape)
bool SimGrantTable::copy_call(std::span<GrantCopySegment> segments) noexcept {
  std::vector<std::shared_ptr<DomainView>> keep;
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < segments.size(); ++i) {
      auto& seg = segments[i];
      Resolved& r = scratch_[i];
      r = Resolved{};
      r.keep = &keep;
      seg.status = resolve_side(seg.source, seg.len, false, r, r.src);
      if (seg.status == GNTST_okay) seg.status = resolve_side(seg.dest, seg.len, true, r, r.dst);
      if (seg.status != GNTST_okay && r.src_view != nullptr) {
        unpin(*r.src_view, r.src_ref, false);
        r.src_view = nullptr;
      }
    }
  }
  for (std::size_t i = 0; i < segments.size(); ++i) {
    // memmove: a segment may name the same page on both sides.
    if (segments[i].status == GNTST_okay)
      std::memmove(scratch_[i].dst, scratch_[i].src, segments[i].len);
  }
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const Resolved& r = scratch_[i];
    if (r.src_view != nullptr) unpin(*r.src_view, r.src_ref, false);
    if (r.dst_view != nullptr) unpin(*r.dst_view, r.dst_ref, true);
  }
  return true;
}

Result<MappedGrants> SimGrantTable::map(DomId granter, std::span<const GrantRef> refs,
                                        Access access) {
  if (refs.empty()) return errno_code(EINVAL);
  const bool write = access == Access::read_write;
  std::lock_guard lock(mu_);
  auto found = view_for(granter);
  if (!found) return found.error();
  auto view = std::move(*found);
  // The granter's whole memory is already mapped here (view->memory): a mapping is its pages
  // pinned (GTF_reading/GTF_writing set), handed out where they are. No mmap per page, which
  // cost more than copying (xensim, like the kernel's grant table, is cooperative: the bits
  // say what the backend may touch, the view does not enforce read-only).
  std::vector<std::byte*> pages;
  pages.reserve(refs.size());
  std::error_code failure;
  for (const GrantRef ref : refs) {
    std::uint32_t frame = 0;
    const std::int16_t st = pin(*view, ref, write, frame);
    if (st != GNTST_okay) {
      failure = map_error_of(st);
      break;
    }
    pages.push_back(view->frame(frame));
  }
  if (failure) {
    // All or nothing: release what this call pinned.
    for (std::size_t i = 0; i < pages.size(); ++i) unpin(*view, refs[i], write);
    return failure;
  }
  auto rec =
      std::make_unique<MapRecord>(MapRecord{std::move(view), {refs.begin(), refs.end()}, write});
  auto* key = reinterpret_cast<std::byte*>(rec.get());
  maps_.emplace(key, std::move(rec));
  return MappedGrants(this, key, std::move(pages), access);
}

void SimGrantTable::unmap(std::byte* addr, std::size_t count) noexcept {
  std::lock_guard lock(mu_);
  auto it = maps_.find(addr);
  if (it == maps_.end()) return;
  const MapRecord& rec = *it->second;
  (void)count;
  for (const GrantRef ref : rec.refs) unpin(*rec.view, ref, rec.write);
  maps_.erase(it);
}

}  // namespace unetback::hv::sim
