// FrontRing / BackRing: the two private views of one Xen shared ring page, with the layout
// of xen/io/ring.h's DEFINE_RING_TYPES, so Linux netfront/netback can be the other side.
//
//   page:  req_prod | req_event | rsp_prod | rsp_event | pvt[4] | pad[44] | entry[size]
//          (64-byte header; each entry is a union of one request and one response)
//
// Pure: no syscalls, no allocation. Every "should I notify the peer?" decision is returned
// to the caller, who owns the event channel.
//
// The shared page belongs to two parties, and the other one may be hostile (a guest, or —
// for a frontend — a backend in a driver domain). So:
//  * shared indices are read and written through std::atomic_ref with explicit ordering;
//  * entries are copied out of the page exactly once (take_request / copy_request_at), and
//    only the copy is examined (XSA-155);
//  * the number of requests a backend will look at is bounded by the ring size and by the
//    responses it still owes (XEN_RING_NR_UNCONSUMED_REQUESTS), whatever req_prod says.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/util/result.hpp"
#include "common/util/strong_id.hpp"
#include "common/wire/netif.hpp"

namespace unetback::ring {

inline constexpr std::size_t kRingPageSize = 4096;
inline constexpr std::size_t kRingHeaderSize = 64;

/// ring.h's shared-ring header (`struct <name>_sring` up to `ring[]`).
struct SharedRingHeader {
  std::uint32_t req_prod;
  std::uint32_t req_event;
  std::uint32_t rsp_prod;
  std::uint32_t rsp_event;
  std::uint8_t pvt[4];
  std::uint8_t pad[44];
};
static_assert(sizeof(SharedRingHeader) == kRingHeaderSize);
static_assert(std::is_standard_layout_v<SharedRingHeader>);

template <typename Req, typename Rsp>
union RingEntry {
  Req req;
  Rsp rsp;
};

/// __CONST_RING_SIZE: the largest power of two number of entries that fits in a page.
template <typename Req, typename Rsp>
constexpr std::uint32_t ring_entries(std::size_t page_size = kRingPageSize) {
  const std::size_t fit = (page_size - kRingHeaderSize) / sizeof(RingEntry<Req, Rsp>);
  std::uint32_t n = 1;
  while (static_cast<std::size_t>(n) * 2 <= fit) n *= 2;
  return n;
}

// The layout is the system header's, field for field.
static_assert(offsetof(netif_tx_sring, req_prod) == offsetof(SharedRingHeader, req_prod));
static_assert(offsetof(netif_tx_sring, req_event) == offsetof(SharedRingHeader, req_event));
static_assert(offsetof(netif_tx_sring, rsp_prod) == offsetof(SharedRingHeader, rsp_prod));
static_assert(offsetof(netif_tx_sring, rsp_event) == offsetof(SharedRingHeader, rsp_event));
static_assert(offsetof(netif_tx_sring, pvt) == offsetof(SharedRingHeader, pvt));
static_assert(offsetof(netif_tx_sring, ring) == kRingHeaderSize);
static_assert(offsetof(netif_rx_sring, ring) == kRingHeaderSize);
static_assert(sizeof(RingEntry<wire::TxRequest, wire::TxResponse>) == sizeof(netif_tx_sring_entry));
static_assert(sizeof(RingEntry<wire::RxRequest, wire::RxResponse>) == sizeof(netif_rx_sring_entry));
static_assert(ring_entries<wire::TxRequest, wire::TxResponse>() == 256);
static_assert(ring_entries<wire::RxRequest, wire::RxResponse>() == 256);

/// The indices of both sides, for `unetback-ctl` ring dumps and logs.
struct RingIndices {
  std::uint32_t req_prod, req_event, rsp_prod, rsp_event;  // shared (as read now)
  std::uint32_t req_prod_pvt_or_req_cons;                  // front: req_prod_pvt; back: req_cons
  std::uint32_t rsp_cons_or_rsp_prod_pvt;  // front: rsp_cons;     back: rsp_prod_pvt
};

namespace detail {

/// Access to the shared words of one ring page.
class SharedPage {
 public:
  explicit SharedPage(void* page) : page_(static_cast<std::byte*>(page)) {}

  [[nodiscard]] std::atomic_ref<std::uint32_t> word(std::size_t offset) const {
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(page_ + offset));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> req_prod() const {
    return word(offsetof(SharedRingHeader, req_prod));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> req_event() const {
    return word(offsetof(SharedRingHeader, req_event));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> rsp_prod() const {
    return word(offsetof(SharedRingHeader, rsp_prod));
  }
  [[nodiscard]] std::atomic_ref<std::uint32_t> rsp_event() const {
    return word(offsetof(SharedRingHeader, rsp_event));
  }
  [[nodiscard]] std::byte* entry(std::size_t slot, std::size_t entry_size) const {
    return page_ + kRingHeaderSize + slot * entry_size;
  }
  [[nodiscard]] std::byte* base() const { return page_; }

 private:
  std::byte* page_;
};

/// ring.h's notify rule: the peer asked to be woken when the producer passes `event`;
/// notify iff `event` lies in (old, new] (unsigned arithmetic, so it wraps at 2^32).
constexpr bool need_notify(std::uint32_t old_prod, std::uint32_t new_prod, std::uint32_t event) {
  return static_cast<std::uint32_t>(new_prod - event) <
         static_cast<std::uint32_t>(new_prod - old_prod);
}

/// Copies a T out of (or into) a ring entry with memcpy: the peer may be writing the
/// same bytes concurrently, and a byte copy into a private object is the only read we make.
template <typename T>
T load_entry(const std::byte* src) {
  T v;
  std::memcpy(&v, src, sizeof(T));
  return v;
}
template <typename T>
void store_entry(std::byte* dst, const T& v) {
  std::memcpy(dst, &v, sizeof(T));
}

}  // namespace detail

using detail::need_notify;

/// The frontend's view: produces requests, consumes responses.
template <typename Req, typename Rsp>
class FrontRing {
 public:
  using Entry = RingEntry<Req, Rsp>;
  static constexpr std::uint32_t kSize = ring_entries<Req, Rsp>();

  /// Initialises the shared page (SHARED_RING_INIT + FRONT_RING_INIT): both producers at
  /// `start` (0 normally), both event indices start + 1, private bytes zeroed.
  /// `start` other than 0 is for tests that exercise index wrap-around.
  static FrontRing init(void* page, RingIdx start = RingIdx{0}) {
    std::memset(page, 0, kRingHeaderSize);
    FrontRing r(page);
    r.req_prod_pvt_ = start;
    r.rsp_cons_ = start;
    r.shared_.req_prod().store(start.value(), std::memory_order_relaxed);
    r.shared_.rsp_prod().store(start.value(), std::memory_order_relaxed);
    r.shared_.req_event().store(start.value() + 1, std::memory_order_relaxed);
    r.shared_.rsp_event().store(start.value() + 1, std::memory_order_relaxed);
    // ORDERING: publishes the zeroed header before the page's grant ref is handed over
    // (the ref travels through xenstore, i.e. through syscalls, after this).
    std::atomic_thread_fence(std::memory_order_release);
    return r;
  }

  [[nodiscard]] static constexpr std::uint32_t size() { return kSize; }
  [[nodiscard]] RingIdx req_prod_pvt() const { return req_prod_pvt_; }
  [[nodiscard]] RingIdx rsp_cons() const { return rsp_cons_; }

  /// Request slots we may still fill: size - (requests not yet answered).
  [[nodiscard]] std::uint32_t free_requests() const {
    return kSize - req_prod_pvt_.since(rsp_cons_);
  }
  [[nodiscard]] bool full() const { return free_requests() == 0; }

  /// Writes the next request (at req_prod_pvt) privately; push_requests() publishes it.
  void put_request(const Req& req) { put_request_as(req); }
  /// Writes another type into the next request slot (a netif extra_info after a TX request).
  template <typename T>
  void put_request_as(const T& v) {
    static_assert(sizeof(T) <= sizeof(Entry) && std::is_trivially_copyable_v<T>);
    detail::store_entry(slot(req_prod_pvt_), v);
    ++req_prod_pvt_;
  }

  /// RING_PUSH_REQUESTS_AND_CHECK_NOTIFY: publishes the private requests; true if the
  /// backend asked to be notified (req_event passed).
  [[nodiscard]] bool push_requests() {
    const std::uint32_t old_prod = shared_.req_prod().load(std::memory_order_relaxed);
    const std::uint32_t new_prod = req_prod_pvt_.value();
    // ORDERING: release pairs with the backend's acquire load of req_prod in
    // unconsumed_requests(): it sees the request bodies before the new producer index.
    shared_.req_prod().store(new_prod, std::memory_order_release);
    // ORDERING: full fence between publishing req_prod and reading req_event; pairs with
    // the fence in BackRing::final_check_for_requests() (after it writes req_event). Without
    // it both sides could miss each other and sleep forever.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return need_notify(old_prod, new_prod, shared_.req_event().load(std::memory_order_relaxed));
  }

  /// Responses published by the backend and not yet taken (may exceed what we asked for if
  /// the backend is hostile: check response_prod_overflow() first).
  [[nodiscard]] std::uint32_t unconsumed_responses() const {
    // ORDERING: acquire pairs with the backend's release store of rsp_prod.
    return shared_.rsp_prod().load(std::memory_order_acquire) - rsp_cons_.value();
  }
  /// RING_RESPONSE_PROD_OVERFLOW: more responses than the ring can hold => ill-behaved backend.
  [[nodiscard]] bool response_prod_overflow() const { return unconsumed_responses() > kSize; }

  /// Copies the response at rsp_cons out of the ring once and advances rsp_cons.
  [[nodiscard]] Rsp take_response() { return take_response_as<Rsp>(); }
  /// Copies another type (an extra_info in an RX response slot) and advances rsp_cons.
  template <typename T>
  [[nodiscard]] T take_response_as() {
    static_assert(sizeof(T) <= sizeof(Entry) && std::is_trivially_copyable_v<T>);
    T v = detail::load_entry<T>(slot(rsp_cons_));
    ++rsp_cons_;
    return v;
  }

  /// RING_FINAL_CHECK_FOR_RESPONSES: true if responses are waiting; otherwise arms
  /// rsp_event for the next one and checks again (closing the race with the producer).
  [[nodiscard]] bool final_check_for_responses() {
    if (unconsumed_responses() != 0) return true;
    shared_.rsp_event().store(rsp_cons_.value() + 1, std::memory_order_relaxed);
    // ORDERING: pairs with the fence in BackRing::push_responses(): either the backend
    // sees our new rsp_event, or we see its new rsp_prod.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return unconsumed_responses() != 0;
  }

  [[nodiscard]] RingIndices indices() const {
    return {shared_.req_prod().load(std::memory_order_relaxed),
            shared_.req_event().load(std::memory_order_relaxed),
            shared_.rsp_prod().load(std::memory_order_relaxed),
            shared_.rsp_event().load(std::memory_order_relaxed),
            req_prod_pvt_.value(),
            rsp_cons_.value()};
  }

 private:
  explicit FrontRing(void* page) : shared_(page) {}
  [[nodiscard]] std::byte* slot(RingIdx i) const {
    return shared_.entry(i.value() & (kSize - 1), sizeof(Entry));
  }

  detail::SharedPage shared_;
  RingIdx req_prod_pvt_{0};
  RingIdx rsp_cons_{0};
};

/// The backend's view: consumes requests, produces responses.
template <typename Req, typename Rsp>
class BackRing {
 public:
  using Entry = RingEntry<Req, Rsp>;
  static constexpr std::uint32_t kSize = ring_entries<Req, Rsp>();

  /// BACK_RING_ATTACH to a page the frontend initialised: starts at the current rsp_prod
  /// (so a reconnecting backend resumes where the last one stopped) and refuses a page
  /// whose frontend claims more outstanding requests than the ring holds (netback's
  /// xenvif_map_frontend_data_rings check).
  static Result<BackRing> attach(void* page) {
    BackRing r(page, RingIdx{0});
    const std::uint32_t rsp_prod = r.shared_.rsp_prod().load(std::memory_order_acquire);
    const std::uint32_t req_prod = r.shared_.req_prod().load(std::memory_order_acquire);
    if (req_prod - rsp_prod > kSize) return std::errc::io_error;
    r.req_cons_ = RingIdx{rsp_prod};
    r.rsp_prod_pvt_ = RingIdx{rsp_prod};
    return r;
  }

  [[nodiscard]] static constexpr std::uint32_t size() { return kSize; }
  [[nodiscard]] RingIdx req_cons() const { return req_cons_; }
  [[nodiscard]] RingIdx rsp_prod_pvt() const { return rsp_prod_pvt_; }

  /// The frontend's request producer, as published now (acquire).
  [[nodiscard]] RingIdx req_prod() const {
    // ORDERING: acquire pairs with FrontRing::push_requests()'s release store.
    return RingIdx{shared_.req_prod().load(std::memory_order_acquire)};
  }

  /// XEN_RING_NR_UNCONSUMED_REQUESTS: requests we may consume now. Bounded by the ring
  /// size minus the responses we still owe, so a frontend that pushes req_prod far ahead
  /// can never make us read more than kSize entries or overwrite unanswered slots.
  [[nodiscard]] std::uint32_t unconsumed_requests() const { return consumable(req_prod()); }

  /// RING_REQUEST_PROD_OVERFLOW: the frontend claims more requests than can exist
  /// (netback: "Impossible number of requests" => the vif is disabled).
  [[nodiscard]] bool request_prod_overflow() const {
    return req_prod().since(rsp_prod_pvt_) > kSize;
  }

  /// RING_COPY_REQUEST at req_cons, then advances req_cons. The caller must have checked
  /// unconsumed_requests() > 0.
  [[nodiscard]] Req take_request() { return take_request_as<Req>(); }
  /// The same for another type in a request slot (an extra_info following a TX request).
  template <typename T>
  [[nodiscard]] T take_request_as() {
    T v = copy_request_at<T>(req_cons_);
    ++req_cons_;
    return v;
  }
  /// Copies the request slot at `i` without consuming it.
  template <typename T = Req>
  [[nodiscard]] T copy_request_at(RingIdx i) const {
    static_assert(sizeof(T) <= sizeof(Entry) && std::is_trivially_copyable_v<T>);
    return detail::load_entry<T>(slot(i));
  }
  /// Marks `n` more requests consumed (after copying them with copy_request_at).
  void consume_requests(std::uint32_t n) { req_cons_ += n; }

  /// Writes the next response (at rsp_prod_pvt) privately; push_responses() publishes.
  void put_response(const Rsp& rsp) { put_response_as(rsp); }
  /// Writes another type into the next response slot (an extra_info in an RX response).
  template <typename T>
  void put_response_as(const T& v) {
    write_response_at(rsp_prod_pvt_, v);
    ++rsp_prod_pvt_;
  }
  /// Writes a response slot at `i` (>= rsp_prod_pvt) without advancing, for a batch whose
  /// responses are finished out of order; advance_responses() then makes them private-final.
  template <typename T>
  void write_response_at(RingIdx i, const T& v) {
    static_assert(sizeof(T) <= sizeof(Entry) && std::is_trivially_copyable_v<T>);
    detail::store_entry(slot(i), v);
  }
  void advance_responses(std::uint32_t n) { rsp_prod_pvt_ += n; }

  /// RING_PUSH_RESPONSES_AND_CHECK_NOTIFY: publishes rsp_prod_pvt; true if the frontend
  /// asked to be notified (rsp_event passed).
  [[nodiscard]] bool push_responses() {
    const std::uint32_t old_prod = shared_.rsp_prod().load(std::memory_order_relaxed);
    const std::uint32_t new_prod = rsp_prod_pvt_.value();
    // ORDERING: release pairs with FrontRing::unconsumed_responses()' acquire load.
    shared_.rsp_prod().store(new_prod, std::memory_order_release);
    // ORDERING: full fence between publishing rsp_prod and reading rsp_event; pairs with
    // the fence in FrontRing::final_check_for_responses().
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return need_notify(old_prod, new_prod, shared_.rsp_event().load(std::memory_order_relaxed));
  }

  /// RING_FINAL_CHECK_FOR_REQUESTS: true if requests are waiting; otherwise arms req_event
  /// for the next one and checks again.
  [[nodiscard]] bool final_check_for_requests() {
    if (unconsumed_requests() != 0) return true;
    shared_.req_event().store(req_cons_.value() + 1, std::memory_order_relaxed);
    // ORDERING: pairs with the fence in FrontRing::push_requests().
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return unconsumed_requests() != 0;
  }

  /// Whether at least `needed` requests are available; if not, asks the frontend to notify
  /// on its next request and re-checks (netback's xenvif_rx_ring_slots_available: a
  /// host->guest packet waits until the guest has posted enough buffers).
  [[nodiscard]] bool requests_available(std::uint32_t needed) {
    for (;;) {
      const RingIdx prod = req_prod();
      if (consumable(prod) >= needed) return true;
      shared_.req_event().store(prod.value() + 1, std::memory_order_relaxed);
      // ORDERING: pairs with the fence in FrontRing::push_requests().
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (req_prod() == prod) return false;
    }
  }

  [[nodiscard]] RingIndices indices() const {
    return {shared_.req_prod().load(std::memory_order_relaxed),
            shared_.req_event().load(std::memory_order_relaxed),
            shared_.rsp_prod().load(std::memory_order_relaxed),
            shared_.rsp_event().load(std::memory_order_relaxed),
            req_cons_.value(),
            rsp_prod_pvt_.value()};
  }

 private:
  BackRing(void* page, RingIdx start) : shared_(page), req_cons_(start), rsp_prod_pvt_(start) {}

  /// min(requests published, ring size - responses still owed) for a given req_prod.
  [[nodiscard]] std::uint32_t consumable(RingIdx prod) const {
    const std::uint32_t req = prod.since(req_cons_);
    const std::uint32_t rsp = kSize - req_cons_.since(rsp_prod_pvt_);
    return std::min(req, rsp);
  }
  [[nodiscard]] std::byte* slot(RingIdx i) const {
    return shared_.entry(i.value() & (kSize - 1), sizeof(Entry));
  }

  detail::SharedPage shared_;
  RingIdx req_cons_;
  RingIdx rsp_prod_pvt_;
};

using TxFrontRing = FrontRing<wire::TxRequest, wire::TxResponse>;
using TxBackRing = BackRing<wire::TxRequest, wire::TxResponse>;
using RxFrontRing = FrontRing<wire::RxRequest, wire::RxResponse>;
using RxBackRing = BackRing<wire::RxRequest, wire::RxResponse>;
using CtrlFrontRing = FrontRing<wire::CtrlRequest, wire::CtrlResponse>;
using CtrlBackRing = BackRing<wire::CtrlRequest, wire::CtrlResponse>;
// netif.h's ctrl ring: 16-byte entries, (4096 - 64) / 16 rounded down to a power of 2.
static_assert(CtrlBackRing::kSize == 128);

}  // namespace unetback::ring
