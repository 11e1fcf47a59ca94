#include "backend/vif/vif_record.hpp"

#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "common/wire/netif.hpp"

namespace unetback::vif {
namespace {

constexpr std::uint32_t kRing = 256;

/// The shared header words of a ring page (ring.h layout).
struct PageWords {
  explicit PageWords(void* page) : base(static_cast<std::byte*>(page)) {}
  [[nodiscard]] std::atomic_ref<std::uint32_t> word(std::size_t off) const {
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(base + off));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> req_prod() const {
    return word(offsetof(ring::SharedRingHeader, req_prod));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> rsp_prod() const {
    return word(offsetof(ring::SharedRingHeader, rsp_prod));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> rsp_event() const {
    return word(offsetof(ring::SharedRingHeader, rsp_event));
  }
  template <typename T>
  void put(std::uint32_t k, std::size_t entry_size, const T& v) const {
    std::memcpy(base + ring::kRingHeaderSize + (k & (kRing - 1)) * entry_size, &v, sizeof v);
  }
  std::byte* base;
};

/// S (the page's rsp_prod), P and C (the record's rsp_prod_pvt and req_cons).
struct Window {
  std::uint32_t s, p, c;
};

/// The window, if S <= P <= C, each step at most a ring, within the record's base: else the
/// record and the page do not belong together (or the frontend rewrote rsp_prod): EPROTO.
template <typename Slot>
Result<Window> window_of(const PageWords& pg, RingRecord<Slot>& rec) {
  const std::uint32_t s = pg.rsp_prod().load(std::memory_order_acquire);
  const std::uint32_t p = rec_word(rec.rsp_prod_pvt).load();
  const std::uint32_t c = rec_word(rec.req_cons).load();
  if (p - s > kRing || c - p > kRing || p - rec.base > c - rec.base) return errno_code(EPROTO);
  return Window{s, p, c};
}

/// Publishes rsp_prod = c after the record says c (so a second death here recovers again).
template <typename Slot>
bool publish(const PageWords& pg, RingRecord<Slot>& rec, std::uint32_t s, std::uint32_t c) {
  // ORDERING: release: the response slots written by recovery before the record's index.
  rec_word(rec.rsp_prod_pvt).store(c, std::memory_order_release);
  // ORDERING: release pairs with the frontend's acquire load of rsp_prod.
  pg.rsp_prod().store(c, std::memory_order_release);
  // ORDERING: full fence between rsp_prod and rsp_event, as BackRing::push_responses().
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return ring::need_notify(s, c, pg.rsp_event().load(std::memory_order_relaxed));
}

/// True if the regular file has a hole: fewer bytes allocated than its size. (Not SEEK_HOLE:
/// ext4 reports the unwritten extents posix_fallocate() makes as holes; st_blocks counts them.)
bool has_hole(const struct stat& st) {
  return static_cast<off_t>(st.st_blocks) * 512 < st.st_size;
}

}  // namespace

Result<RingRecovery> recover_tx_ring(void* page, TxRingRecord& rec) {
  const PageWords pg(page);
  const auto w = window_of(pg, rec);
  if (!w) return w.error();
  const auto [s, p, c] = *w;
  const std::uint32_t first = c - rec.base < kRing ? rec.base : c - kRing;
  std::vector<std::uint32_t> open;
  for (std::uint32_t k = first; k != c; ++k) {
    const TxSlotRecord& sl = rec.slots[k & (kRing - 1)];
    if (sl.idx != k || sl.kind > static_cast<std::uint16_t>(TxSlotKind::frag))
      return errno_code(EPROTO);
    // Answered iff its response index lies among the published ones.
    const bool answered = p - 1 - sl.ans < kRing;
    if (!answered) open.push_back(k);
  }
  if (open.size() != c - p) return errno_code(EPROTO);
  RingRecovery out;
  out.pushed = p - s;
  out.answered = c - p;
  std::uint32_t at = p;
  for (const std::uint32_t k : open) {
    TxSlotRecord& sl = rec.slots[k & (kRing - 1)];
    const bool extra = sl.kind == static_cast<std::uint16_t>(TxSlotKind::extra);
    // Whether the frame reached the TAP is not known: DROPPED (the guest's TCP resends).
    const wire::TxResponse rsp{
        static_cast<std::uint16_t>(extra ? 0 : sl.id),
        static_cast<std::int16_t>(extra ? wire::RspStatus::null : wire::RspStatus::dropped)};
    pg.put(at, sizeof(ring::TxBackRing::Entry), rsp);
    rec_word(sl.ans).store(at, std::memory_order_relaxed);
    ++at;
  }
  out.notify = publish(pg, rec, s, c);
  return out;
}

Result<RingRecovery> recover_rx_ring(void* page, RxRingRecord& rec) {
  const PageWords pg(page);
  const auto w = window_of(pg, rec);
  if (!w) return w.error();
  const auto [s, p, c] = *w;
  for (std::uint32_t k = p; k != c; ++k)
    if (rec.slots[k & (kRing - 1)].idx != k) return errno_code(EPROTO);
  RingRecovery out;
  out.pushed = p - s;
  out.answered = c - p;
  for (std::uint32_t k = p; k != c; ++k) {
    wire::RxResponse rsp{};
    rsp.id = rec.slots[k & (kRing - 1)].id;
    rsp.offset = 0;
    rsp.flags = 0;
    rsp.status = static_cast<std::int16_t>(wire::RspStatus::error);
    pg.put(k, sizeof(ring::RxBackRing::Entry), rsp);
  }
  out.notify = publish(pg, rec, s, c);
  return out;
}

std::filesystem::path VifRecord::path_for(const std::filesystem::path& dir, DomId domid,
                                          DevId devid) {
  return dir /
         ("vif-" + std::to_string(domid.value()) + "-" + std::to_string(devid.value()) + ".state");
}

Result<VifRecord> VifRecord::map(const std::filesystem::path& file, UniqueFd fd, std::size_t size) {
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (m == MAP_FAILED) return last_errno();
  VifRecord r;
  r.path_ = file;
  r.base_ = static_cast<std::byte*>(m);
  r.size_ = size;
  r.fd_ = std::move(fd);
  return r;
}

Result<VifRecord> VifRecord::create(const std::filesystem::path& file, DomId domid, DevId devid,
                                    std::uint32_t nr_queues, int ifindex,
                                    std::span<const std::byte> keys) {
  if (nr_queues == 0 || nr_queues > kRecordMaxQueues || keys.size() > kRecordMaxKeysBytes)
    return errno_code(EINVAL);
  // A new inode: a successor still reading the old file (it cannot: the lock) sees no change.
  ::unlink(file.c_str());
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return last_errno();
  // Held while this process serves the vif (a new file: nobody else holds it).
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const auto err = last_errno();
    ::unlink(file.c_str());
    return err;
  }
  // Room for values that grow when the guest or the toolstack changes them; none when the
  // snapshot was too large to keep at all.
  const std::size_t capacity = keys.empty() ? 0 : keys.size() + kRecordKeysSlack;
  const std::size_t size = size_for(nr_queues) + sizeof(McastRecord) + capacity;
  // Every page allocated before it is mapped: a sparse file on a full tmpfs maps fine and then
  // raises SIGBUS at the first store into it, which would end the daemon (and, as a half-made
  // record, the next one). Here a full state directory is ENOSPC: this vif has no record.
  if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size)); err != 0) {
    ::unlink(file.c_str());
    return errno_code(err);
  }
  auto mapped = map(file, std::move(fd), size);
  if (!mapped) {
    ::unlink(file.c_str());
    return mapped;
  }
  VifRecord r = std::move(*mapped);
  RecordHeader& h = r.header();
  h.version = kRecordVersion;
  h.state = static_cast<std::uint32_t>(RecordState::live);
  h.nr_queues = nr_queues;
  h.domid = domid.value();
  h.devid = devid.value();
  h.ifindex = ifindex;
  h.keys_bytes = static_cast<std::uint32_t>(keys.size());
  h.keys_capacity = static_cast<std::uint32_t>(capacity);
  // posix_fallocate's pages read as zeros: the multicast list is empty.
  if (!keys.empty()) std::memcpy(r.base_ + r.keys_offset(), keys.data(), keys.size());
  // ORDERING: release: a reader that sees the magic sees the header.
  rec_word(h.magic).store(kRecordMagic, std::memory_order_release);
  return r;
}

Result<VifRecord> VifRecord::open(const std::filesystem::path& file, DomId domid, DevId devid) {
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return last_errno();
  // A live process serves it (its daemon has not ended yet): not ours to settle or delete.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK ? errno_code(EBUSY) : last_errno();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return last_errno();
  const auto size = static_cast<std::size_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || size < sizeof(RecordHeader)) return errno_code(EPROTO);
  // A record with a hole was never finished (or not by create()): a store into the hole could
  // raise SIGBUS on a full filesystem. Not a record.
  if (has_hole(st)) return errno_code(EPROTO);
  auto mapped = map(file, std::move(fd), size);
  if (!mapped) return mapped;
  VifRecord r = std::move(*mapped);
  RecordHeader& h = r.header();
  if (h.magic != kRecordMagic || h.version < 1 || h.version > kRecordVersion || h.nr_queues == 0 ||
      h.nr_queues > kRecordMaxQueues || h.domid != domid.value() || h.devid != devid.value())
    return errno_code(EPROTO);
  // A version-1 record's word here was reserved (zero); it holds no keys either way. Before
  // version 3 the keys filled their room exactly.
  if (h.version == 1) h.keys_bytes = 0;
  if (h.version < 3) h.keys_capacity = h.keys_bytes;
  const bool ok = h.keys_capacity <= kRecordMaxKeysBytes + kRecordKeysSlack &&
                  h.keys_bytes <= h.keys_capacity && size == r.keys_offset() + h.keys_capacity;
  if (!ok) return errno_code(EPROTO);
  return r;
}

bool VifRecord::set_keys(std::span<const std::byte> keys) const {
  RecordHeader& h = header();
  // ORDERING: release: a successor reading the keys sees none before the bytes change.
  rec_word(h.keys_bytes).store(0, std::memory_order_release);
  if (keys.empty() || keys.size() > h.keys_capacity) return keys.empty();
  std::memcpy(base_ + keys_offset(), keys.data(), keys.size());
  // ORDERING: release: the new bytes before the length that covers them.
  rec_word(h.keys_bytes).store(static_cast<std::uint32_t>(keys.size()), std::memory_order_release);
  return true;
}

VifRecord::VifRecord(VifRecord&& o) noexcept {
  *this = std::move(o);
}

VifRecord& VifRecord::operator=(VifRecord&& o) noexcept {
  if (this == &o) return *this;
  unmap();
  path_ = std::move(o.path_);
  base_ = std::exchange(o.base_, nullptr);
  size_ = std::exchange(o.size_, 0);
  fd_ = std::move(o.fd_);
  return *this;
}

VifRecord::~VifRecord() {
  unmap();
}

void VifRecord::unmap() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  fd_.reset();  // and the lock with it
}

void VifRecord::remove() {
  if (base_ == nullptr) return;
  ::unlink(path_.c_str());
  unmap();
}

}  // namespace unetback::vif
