// VifRecord: the state of one connected vif that outlives the daemon's process, so that a
// successor (planned takeover, or a restart after a crash) serves the guest's rings on
// without the frontend ever leaving Connected (issue 20).
//
// An mmap'd file, `<state dir>/vif-<domid>-<devid>.state`, written with plain stores as the
// rings advance (no syscall, lock or allocation per packet). Per queue it holds the refs and
// ports the frontend gave, and per ring:
//   * `req_cons`: the requests consumed, published (release) only after a copy of each
//     consumed request (id, kind) is in `slots`;
//   * `rsp_prod_pvt`: the responses written, published (release) before the shared rsp_prod
//     and only after the responses are in the ring slots (and, for TX, after each answered
//     request's slot says which response index answered it).
//
// netif rings share one slot per request and response: the response at index i overwrites
// request i. So recovery never reads a ring slot at or above the recorded req_cons as a
// request, and never believes a response slot above the recorded rsp_prod_pvt:
//   S = shared rsp_prod, P = recorded rsp_prod_pvt, C = recorded req_cons (S <= P <= C):
//   * [S, P): responses written before P was recorded: pushed as they are;
//   * TX: every request consumed below C whose answer index is not below P is answered
//     (DROPPED; a NULL for an extra), at [P, C), from the recorded copy;
//   * RX: requests [P, C) (answered in ring order) get an ERROR response with the recorded
//     id: the buffer goes back to the frontend, which posts it again (none is lost).
// A SIGKILL at any instruction leaves a record that recovers this way; a record that does not
// add up (e.g. a frontend that rewrote rsp_prod) is refused and the vif reconnects instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "backend/vif/tx_request_parser.hpp"
#include "common/ring/shared_ring.hpp"
#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "common/util/unique_fd.hpp"

namespace unetback::vif {

inline constexpr std::uint32_t kRecordMagic = 0x52464955;  // "UIFR"
/// 2: the keys the connection was made from follow the queues (`keys_bytes`).
/// 3: the guest's multicast groups follow the queues (McastRecord), then the keys, in room for
///    more than they take (`keys_capacity`): a value applied after the connect (a rate, an XDP
///    headroom, request-multicast-control) is written into them.
/// Versions 1 (no keys) and 2 are still read, so that an upgrade from them adopts the vifs.
inline constexpr std::uint32_t kRecordVersion = 3;
inline constexpr std::uint32_t kRecordMaxQueues = 64;
/// Room for the connection's keys (xenbus::encode_key_snapshot); more and none are kept.
inline constexpr std::uint32_t kRecordMaxKeysBytes = 64 * 1024;
/// The room a version-3 record leaves after its keys, for values that grow when they change.
inline constexpr std::uint32_t kRecordKeysSlack = 512;

/// Who may pick the record up.
enum class RecordState : std::uint32_t {
  live = 1,         // a daemon serves it (or died serving it: recovery)
  handed_over = 2,  // the daemon stopped its queues at a pass boundary and left (takeover)
};

enum class TxSlotKind : std::uint16_t { first = 0, extra = 1, frag = 2 };

struct TxSlotRecord {
  std::uint32_t idx;  // the ring index this copy was consumed at
  std::uint32_t ans;  // the response index that answered it (not below P: not answered)
  std::uint16_t id;
  std::uint16_t kind;  // TxSlotKind
};
struct RxSlotRecord {
  std::uint32_t idx;
  std::uint16_t id;
  std::uint16_t reserved;
};

template <typename Slot>
struct RingRecord {
  std::uint32_t req_cons;
  std::uint32_t rsp_prod_pvt;
  std::uint32_t base;  // the index the ring was attached at (nothing below it was consumed)
  std::uint32_t reserved;
  Slot slots[256];
};
using TxRingRecord = RingRecord<TxSlotRecord>;
using RxRingRecord = RingRecord<RxSlotRecord>;
static_assert(ring::TxBackRing::kSize == 256 && ring::RxBackRing::kSize == 256);

struct QueueRecord {
  std::uint32_t tx_ref, rx_ref;
  std::uint32_t tx_evtchn, rx_evtchn;  // the frontend's ports (rx == tx: one channel)
  TxRingRecord tx;
  RxRingRecord rx;
};

/// Version 3: the vif's multicast list (McastFilter's entries: MAC | bit 48, or 0 for a free
/// one), each word stored as the filter changes it.
struct McastRecord {
  std::uint64_t entries[64];
};

struct RecordHeader {
  std::uint32_t magic;  // written last at creation (release)
  std::uint32_t version;
  std::uint32_t state;  // RecordState
  std::uint32_t nr_queues;
  std::uint32_t domid, devid;
  std::int32_t ifindex;         // the TAP's
  std::uint32_t keys_bytes;     // version 2: the key snapshot after the queues (0: none)
  std::uint32_t keys_capacity;  // version 3: the room for it (keys_bytes before)
  std::uint32_t reserved[7];
};
static_assert(sizeof(RecordHeader) == 64);

/// A plain view of the record's words through atomic_ref: the recorder's stores are relaxed
/// except the publishing ones (release), so the compiler keeps their order; a killed process's
/// stores are all in the shared page.
[[nodiscard]] inline std::atomic_ref<std::uint32_t> rec_word(std::uint32_t& w) {
  return std::atomic_ref<std::uint32_t>(w);
}

/// The TX half of a queue's record, written on the queue's thread by TxCore. A default-made
/// recorder records nothing (tests, and a daemon run without a state directory).
class TxRecorder {
 public:
  TxRecorder() = default;
  explicit TxRecorder(TxRingRecord* r) : r_(r) {}
  [[nodiscard]] bool active() const { return r_ != nullptr; }

  /// `pkt` was taken from ring indices [first, first + ring_slots): copies, then req_cons.
  void consumed(RingIdx first, const TxPacket& pkt) {
    if (r_ == nullptr) return;
    std::uint32_t k = first.value();
    put(k++, pkt.first_id, TxSlotKind::first);
    for (std::uint32_t i = 0; i < pkt.nr_extras; ++i) put(k++, 0, TxSlotKind::extra);
    for (std::uint32_t i = 0; i < pkt.nr_frags; ++i) put(k++, pkt.frag_ids[i], TxSlotKind::frag);
    // ORDERING: release: the copies above are in the record before it says they exist.
    rec_word(r_->req_cons).store(k, std::memory_order_release);
  }
  /// The packet taken at `first` (`n` slots) is answered by responses [at, at + n).
  void answered(RingIdx first, std::uint32_t n, RingIdx at) {
    if (r_ == nullptr) return;
    for (std::uint32_t i = 0; i < n; ++i)
      rec_word(r_->slots[(first.value() + i) & 255U].ans)
          .store(at.value() + i, std::memory_order_relaxed);
  }
  /// About to publish responses up to `rsp_prod_pvt` (they are in the ring's slots).
  void published(RingIdx rsp_prod_pvt) {
    if (r_ == nullptr) return;
    // ORDERING: release: the answers and the response slots before the index that covers them.
    rec_word(r_->rsp_prod_pvt).store(rsp_prod_pvt.value(), std::memory_order_release);
  }

 private:
  void put(std::uint32_t k, std::uint16_t id, TxSlotKind kind) {
    TxSlotRecord& s = r_->slots[k & 255U];
    // Not answered: an index far from any P this record will hold.
    rec_word(s.ans).store(k ^ 0x80000000U, std::memory_order_relaxed);
    rec_word(s.idx).store(k, std::memory_order_relaxed);
    s.id = id;
    s.kind = static_cast<std::uint16_t>(kind);
  }
  TxRingRecord* r_ = nullptr;
};

/// The RX half, written on the queue's thread by RxPath.
class RxRecorder {
 public:
  RxRecorder() = default;
  explicit RxRecorder(RxRingRecord* r) : r_(r) {}
  /// Request `k` (id) was consumed; call consumed_upto() once a packet's requests are in.
  void consumed(RingIdx k, std::uint16_t id) {
    if (r_ == nullptr) return;
    RxSlotRecord& s = r_->slots[k.value() & 255U];
    rec_word(s.idx).store(k.value(), std::memory_order_relaxed);
    s.id = id;
  }
  void consumed_upto(RingIdx req_cons) {
    if (r_ == nullptr) return;
    // ORDERING: release: the copies before the index (and before any response is written
    // into their slots, which the caller does after this).
    rec_word(r_->req_cons).store(req_cons.value(), std::memory_order_release);
  }
  void published(RingIdx rsp_prod_pvt) {
    if (r_ == nullptr) return;
    // ORDERING: release: the response slots (copies flushed) before the index.
    rec_word(r_->rsp_prod_pvt).store(rsp_prod_pvt.value(), std::memory_order_release);
  }

 private:
  RxRingRecord* r_ = nullptr;
};

/// What recover_*_ring did.
struct RingRecovery {
  std::uint32_t pushed = 0;    // responses [S, P) published
  std::uint32_t answered = 0;  // consumed requests answered now ([P, C))
  bool notify = false;         // the frontend asked to be told
};

/// Settles a TX ring after its backend died, from the ring page and its record (see the file
/// comment). EPROTO: the record does not add up with the page; nothing was written then.
/// Afterwards the page's rsp_prod is the recorded req_cons, and so is the record's
/// rsp_prod_pvt: ring::TxBackRing::attach() starts there.
Result<RingRecovery> recover_tx_ring(void* page, TxRingRecord& rec);
/// The same for an RX ring.
Result<RingRecovery> recover_rx_ring(void* page, RxRingRecord& rec);
/// Starts a ring's record at the ring's attach index (nothing consumed, nothing answered).
template <typename Slot>
void reset_ring_record(RingRecord<Slot>& r, RingIdx start) {
  r.base = start.value();
  r.req_cons = start.value();
  r.rsp_prod_pvt = start.value();
}

/// The record file of one vif, mapped. Move-only; the destructor unmaps (the file stays:
/// remove() deletes it, for an orderly close).
class VifRecord {
 public:
  /// A new record for `nr_queues` (replacing any old file), state live, magic last, with an
  /// empty multicast list and the connection's keys (xenbus::encode_key_snapshot) after the
  /// queues.
  static Result<VifRecord> create(const std::filesystem::path& file, DomId domid, DevId devid,
                                  std::uint32_t nr_queues, int ifindex,
                                  std::span<const std::byte> keys = {});
  /// An existing record, checked for magic, version, size and ids. ENOENT none; EPROTO bad;
  /// EBUSY: a live process holds it (every record is flock()ed by the process that serves it,
  /// from create() or open() to its end: a successor never settles rings a daemon still runs).
  static Result<VifRecord> open(const std::filesystem::path& file, DomId domid, DevId devid);
  /// `<dir>/vif-<domid>-<devid>.state`.
  static std::filesystem::path path_for(const std::filesystem::path& dir, DomId domid, DevId devid);

  VifRecord() = default;
  VifRecord(VifRecord&& o) noexcept;
  VifRecord& operator=(VifRecord&& o) noexcept;
  VifRecord(const VifRecord&) = delete;
  VifRecord& operator=(const VifRecord&) = delete;
  ~VifRecord();

  [[nodiscard]] bool valid() const { return base_ != nullptr; }
  [[nodiscard]] RecordHeader& header() const { return *reinterpret_cast<RecordHeader*>(base_); }
  [[nodiscard]] QueueRecord& queue(std::uint32_t i) const {
    return reinterpret_cast<QueueRecord*>(base_ + sizeof(RecordHeader))[i];
  }
  /// The connection's keys as create() or set_keys() stored them (empty for none, or a
  /// version-1 record).
  [[nodiscard]] std::span<const std::byte> keys() const {
    return {base_ + keys_offset(), rec_word(header().keys_bytes).load(std::memory_order_acquire)};
  }
  /// Replaces the keys (a value applied after the connect). False, and no keys kept (a
  /// successor reads xenstore), when they do not fit the record's room. A death halfway
  /// leaves no keys, never a mix.
  bool set_keys(std::span<const std::byte> keys) const;
  /// The multicast list (version 3), or nullptr (no record, or an older one, has none).
  [[nodiscard]] McastRecord* mcast() const {
    return valid() && header().version >= 3
               ? reinterpret_cast<McastRecord*>(base_ + size_for(header().nr_queues))
               : nullptr;
  }
  [[nodiscard]] RecordState state() const {
    return static_cast<RecordState>(rec_word(header().state).load(std::memory_order_acquire));
  }
  void set_state(RecordState s) const {
    rec_word(header().state).store(static_cast<std::uint32_t>(s), std::memory_order_release);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// Deletes the file and unmaps it (an orderly close: nothing for a successor).
  void remove();

 private:
  /// Maps `size` bytes of `fd` (the record file `file`, locked) shared and writable; the
  /// record keeps the fd, and so the lock.
  static Result<VifRecord> map(const std::filesystem::path& file, UniqueFd fd, std::size_t size);
  static std::size_t size_for(std::uint32_t nr_queues) {
    return sizeof(RecordHeader) + std::size_t{nr_queues} * sizeof(QueueRecord);
  }
  [[nodiscard]] std::size_t keys_offset() const {
    return size_for(header().nr_queues) + (header().version >= 3 ? sizeof(McastRecord) : 0);
  }
  void unmap();

  std::filesystem::path path_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  UniqueFd fd_;  // flock()ed: held while this process serves the vif
};

}  // namespace unetback::vif
