// Fuzz target: guest-RX response construction (backend/vif/rx_path), without a hypervisor.
//
// A scripted frontend posts RX requests (some with refs it never granted, ids chosen by the
// input), packets of any length and fragment layout arrive from the host side, time moves,
// and RxPath runs passes. Grant copies go to BoundsCheckingGrantTable, an in-memory
// GrantTable that performs each segment into the frontend's pages after checking it:
//  * local source inside a packet still owned by RxPath (never read after its release),
//    within one source page; destination a ref the frontend posted, offset + len <= 4096;
// and can fail segments on request. The frontend then parses every response as netfront
// does and checks:
//  * responses never outnumber the posted requests (the ring's free slots);
//  * each response carries its request's id, offset 0, 0 < status <= 4096 or a GNTST error,
//    more_data exactly on all but the last slot, extra_info + a GSO extra iff the packet has
//    GSO, and the extra's buffer is never written;
//  * the data is the packet's bytes, in order; packets arrive in queue order and the ones
//    skipped were dropped (released, counted);
//  * every packet is released exactly once, after the copies that read it.
#include <algorithm>
#include <array>
#include <cstring>
#include <fuzzer/FuzzedDataProvider.h>
#include <memory>
#include <optional>
#include <vector>

#include "backend/vif/rx_path.hpp"
#include "common/wire/grant.hpp"
#include "fuzz/fuzz_check.hpp"

namespace {

using namespace unetback;

constexpr DomId kFrontend{7};
constexpr std::uint32_t kRingSize = ring::RxBackRing::kSize;
// Ring slot s is posted with ref kGrantBase + s (granted) or kBogusBase + s (never granted),
// so the table knows which slot's buffer a segment targets either way.
constexpr std::uint32_t kGrantBase = 0x1000;
constexpr std::uint32_t kBogusBase = 0x80000;
constexpr std::uint32_t kNone = 0xFFFF'FFFF;

struct alignas(4096) Page {
  std::byte bytes[4096];
};

/// A host->guest packet's bytes, at an alignment chosen by the input.
struct Source {
  std::uint32_t seq = 0;
  std::unique_ptr<Page[]> storage;
  std::byte* data = nullptr;
  std::uint32_t len = 0;
  std::optional<net::GsoInfo> gso;
  wire::RxFlags flags;
  bool released = false;
  bool delivered = false;
};

Page* shared_buffers() {
  static const std::unique_ptr<Page[]> pages(new Page[kRingSize]);
  return pages.get();
}

struct World {
  std::vector<std::unique_ptr<Source>> packets;
  // The posted pages: allocated once (a stale byte is never compared: a slot's bytes are
  // checked only when this run's copy filled them).
  Page* buffers = shared_buffers();
  std::array<std::uint32_t, kRingSize> owner{};      // packet copied into each buffer
  std::array<std::uint16_t, kRingSize> posted_id{};  // request id of each slot
  std::array<bool, kRingSize> posted_bogus{};        // slot posted with an ungranted ref
  std::uint32_t fail_every = 0;                      // fail every Nth good segment (0: never)
  std::uint32_t segments_seen = 0;

  Source* source_of(const void* p, std::uint32_t len) {
    const auto* b = static_cast<const std::byte*>(p);
    for (auto& s : packets)
      if (b >= s->data && b + len <= s->data + s->len) return s.get();
    return nullptr;
  }
};

class BoundsCheckingGrantTable final : public hv::BatchingGrantTable {
 public:
  BoundsCheckingGrantTable(World& w, std::size_t per_call, bool fail_calls)
      : BatchingGrantTable(per_call), w_(w), fail_calls_(fail_calls) {}

  Result<hv::MappedGrants> map(DomId, std::span<const GrantRef>, hv::Access) override {
    return std::errc::operation_not_supported;  // guest RX only copies
  }
  void unmap(std::byte*, std::size_t) noexcept override {}

 protected:
  bool copy_call(std::span<hv::GrantCopySegment> segs) noexcept override {
    for (auto& seg : segs) {
      FUZZ_CHECK(!seg.source.foreign && seg.dest.foreign);
      FUZZ_CHECK(seg.dest.domid == kFrontend);
      FUZZ_CHECK(seg.len > 0);
      FUZZ_CHECK(static_cast<std::uint32_t>(seg.dest.offset) + seg.len <= 4096);
      const auto src = reinterpret_cast<std::uintptr_t>(seg.source.virt);
      FUZZ_CHECK((src & 4095) + seg.len <= 4096);
      Source* s = w_.source_of(seg.source.virt, seg.len);
      FUZZ_CHECK(s != nullptr);  // reads only packet memory
      FUZZ_CHECK(!s->released);  // still owned by RxPath
      const std::uint32_t ref = seg.dest.ref.value();
      const std::uint32_t slot = ref & (kRingSize - 1);
      FUZZ_CHECK(ref == kGrantBase + slot || ref == kBogusBase + slot);
      FUZZ_CHECK((ref == kBogusBase + slot) == w_.posted_bogus[slot]);
      FUZZ_CHECK(w_.owner[slot] == kNone || w_.owner[slot] == s->seq);
      w_.owner[slot] = s->seq;
      if (w_.posted_bogus[slot]) {
        seg.status = GNTST_bad_gntref;
        continue;
      }
      if (w_.fail_every != 0 && ++w_.segments_seen % w_.fail_every == 0) {
        seg.status = GNTST_general_error;
        continue;
      }
      std::memcpy(w_.buffers[slot].bytes + seg.dest.offset, seg.source.virt, seg.len);
      seg.status = GNTST_okay;
    }
    // A whole call failing (the hypercall itself) marks every segment general_error.
    return !(fail_calls_ && ++calls_ % 5 == 3);
  }

 private:
  World& w_;
  bool fail_calls_;
  std::uint32_t calls_ = 0;
};

class Frontend {
 public:
  Frontend(World& w, RingIdx start) : w_(w), front_(ring::RxFrontRing::init(page_.bytes, start)) {
    w_.owner.fill(kNone);
  }
  void* page() { return page_.bytes; }

  void post(FuzzedDataProvider& in, std::uint32_t n) {
    for (std::uint32_t i = 0; i < n && !front_.full(); ++i) {
      const std::uint32_t slot = front_.req_prod_pvt().value() & (kRingSize - 1);
      const bool bogus = in.ConsumeProbability<float>() > 0.97f;
      wire::RxRequest r{};
      r.id = in.ConsumeIntegral<std::uint16_t>();
      r.gref = bogus ? kBogusBase + slot : kGrantBase + slot;
      w_.posted_id[slot] = r.id;
      w_.posted_bogus[slot] = bogus;
      w_.owner[slot] = kNone;
      front_.put_request(r);
    }
    (void)front_.push_requests();
  }

  /// Parses every published response as netfront would.
  void drain(const vif::RxConfig& cfg) {
    FUZZ_CHECK(!front_.response_prod_overflow());
    // Responses never pass the requests: the backend only answers what was posted.
    const auto idx = front_.indices();
    FUZZ_CHECK(static_cast<std::int32_t>(idx.req_prod - idx.rsp_prod) >= 0);
    while (front_.unconsumed_responses() > 0) take_packet(cfg);
  }

  std::uint32_t free_requests() const { return front_.free_requests(); }
  std::uint32_t delivered = 0;

 private:
  std::uint32_t slot_of(RingIdx i) const { return i.value() & (kRingSize - 1); }

  void take_packet(const vif::RxConfig& cfg) {
    std::vector<std::uint32_t> slots;
    std::vector<wire::RxResponse> rsps;
    std::optional<wire::ExtraInfo> extra;
    bool more = true;
    while (more) {
      FUZZ_CHECK(front_.unconsumed_responses() > 0);  // a packet is pushed whole
      const std::uint32_t slot = slot_of(front_.rsp_cons());
      const auto rsp = front_.take_response();
      FUZZ_CHECK(rsp.id == w_.posted_id[slot]);
      FUZZ_CHECK(rsp.offset == 0);
      slots.push_back(slot);
      rsps.push_back(rsp);
      const wire::RxFlags flags = wire::RxFlags::from_raw(rsp.flags);
      if (rsps.size() == 1 && flags.has(wire::RxFlag::extra_info)) {
        FUZZ_CHECK(front_.unconsumed_responses() > 0);
        const std::uint32_t xslot = slot_of(front_.rsp_cons());
        extra = front_.take_response_as<wire::ExtraInfo>();
        FUZZ_CHECK(w_.owner[xslot] == kNone);  // the extra's buffer is never written
      } else if (rsps.size() > 1) {
        FUZZ_CHECK(!flags.has(wire::RxFlag::extra_info));
      }
      more = flags.has(wire::RxFlag::more_data);
    }

    // Every data buffer of the packet holds the same packet, later than the last one.
    const std::uint32_t seq = w_.owner[slots[0]];
    FUZZ_CHECK(seq != kNone && seq < w_.packets.size());
    for (auto s : slots) FUZZ_CHECK(w_.owner[s] == seq);
    Source& p = *w_.packets[seq];
    FUZZ_CHECK(!p.delivered);
    FUZZ_CHECK(p.released);  // the copies are done by the time the responses are pushed
    for (std::uint32_t k = next_seq_; k < seq; ++k) {
      const Source& skipped = *w_.packets[k];
      FUZZ_CHECK(skipped.released);  // dropped, not lost
      FUZZ_CHECK(!skipped.delivered);
    }
    next_seq_ = seq + 1;
    p.delivered = true;
    ++delivered;
    if (!cfg.sg) FUZZ_CHECK(slots.size() == 1);

    // Slot 0's flags: the offload's, with more_data/extra_info set by the layout.
    const auto f0 = wire::RxFlags::from_raw(rsps[0].flags);
    auto expect = p.flags.without(wire::RxFlag::more_data).without(wire::RxFlag::extra_info);
    if (p.gso) expect |= wire::RxFlag::extra_info;
    if (slots.size() > 1) expect |= wire::RxFlag::more_data;
    FUZZ_CHECK(f0 == expect);
    FUZZ_CHECK(extra.has_value() == p.gso.has_value());
    if (extra) {
      FUZZ_CHECK(extra->type == XEN_NETIF_EXTRA_TYPE_GSO);
      FUZZ_CHECK(extra->flags == 0);
      FUZZ_CHECK(extra->u.gso.size == p.gso->size);
      FUZZ_CHECK(extra->u.gso.type == static_cast<std::uint8_t>(p.gso->type));
    }

    bool failed = false;
    std::uint32_t sum = 0;
    for (const auto& r : rsps) {
      if (r.status < 0) {
        FUZZ_CHECK(r.status == GNTST_bad_gntref || r.status == GNTST_general_error);
        failed = true;
      } else {
        FUZZ_CHECK(r.status > 0 && r.status <= 4096);
        sum += static_cast<std::uint32_t>(r.status);
      }
    }
    if (failed) return;
    FUZZ_CHECK(sum == p.len);
    std::uint32_t at = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto n = static_cast<std::uint32_t>(rsps[i].status);
      FUZZ_CHECK(std::memcmp(w_.buffers[slots[i]].bytes, p.data + at, n) == 0);
      if (cfg.coalesce == vif::RxCoalesce::full && i + 1 < slots.size()) FUZZ_CHECK(n == 4096);
      at += n;
    }
  }

  World& w_;
  Page page_{};
  ring::RxFrontRing front_;
  std::uint32_t next_seq_ = 0;
};

constexpr std::uint32_t kMaxLen = 66000;

const std::vector<std::byte>& pattern() {
  static const std::vector<std::byte> p = [] {
    std::vector<std::byte> v(kMaxLen + 4096);
    std::uint32_t x = 0x12345678;
    for (auto& b : v) {
      x = x * 1103515245 + 12345;
      b = static_cast<std::byte>(x >> 24);
    }
    return v;
  }();
  return p;
}

vif::RxPacket make_packet(FuzzedDataProvider& in, World& w) {
  auto src = std::make_unique<Source>();
  src->seq = static_cast<std::uint32_t>(w.packets.size());
  src->len = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint32_t>(1, 200)
                              : in.ConsumeIntegralInRange<std::uint32_t>(1, kMaxLen);
  const auto align = in.ConsumeIntegralInRange<std::uint32_t>(0, 4095);
  // Uninitialised storage (no zeroing cost), filled from a pseudo-random pattern at a
  // per-packet offset so that each packet's bytes differ from its neighbours'.
  src->storage.reset(new Page[(align + src->len + 4095) / 4096]);
  src->data = src->storage[0].bytes + align;
  std::memcpy(src->data, pattern().data() + (src->seq * 977) % 4096, src->len);
  src->flags = wire::RxFlags::from_raw(in.ConsumeIntegral<std::uint16_t>());
  if (in.ConsumeBool()) {
    src->gso = net::GsoInfo{in.ConsumeBool() ? wire::GsoType::tcpv4 : wire::GsoType::tcpv6,
                            in.ConsumeIntegral<std::uint16_t>()};
  }

  vif::RxPacket p;
  p.len = src->len;
  p.offload.flags = src->flags;
  p.offload.gso = src->gso;
  // Split into up to kMaxRxFrags contiguous pieces (zero-length pieces included).
  const auto nr = in.ConsumeIntegralInRange<std::uint32_t>(1, vif::kMaxRxFrags);
  std::uint32_t at = 0;
  for (std::uint32_t f = 0; f < nr; ++f) {
    const std::uint32_t len =
        f + 1 == nr ? src->len - at : in.ConsumeIntegralInRange<std::uint32_t>(0, src->len - at);
    p.frags[f] = vif::RxFrag{hv::GrantCopyPtr::local(src->data + at), len};
    at += len;
  }
  p.nr_frags = nr;
  Source* raw = src.get();
  p.release = vif::RxRelease(
      [](void* s, std::uintptr_t) noexcept {
        auto* src = static_cast<Source*>(s);
        FUZZ_CHECK(!src->released);  // exactly once
        src->released = true;
      },
      raw, 0);
  w.packets.push_back(std::move(src));
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  World w;
  vif::RxConfig cfg;
  cfg.frontend = kFrontend;
  cfg.coalesce = in.ConsumeBool() ? vif::RxCoalesce::legacy : vif::RxCoalesce::full;
  cfg.sg = in.ConsumeProbability<float>() < 0.8f;
  cfg.queue_bytes = in.ConsumeIntegralInRange<std::uint32_t>(0, 1 << 20);
  cfg.drain_timeout = std::chrono::milliseconds(in.ConsumeIntegralInRange<int>(1, 10000));
  cfg.stall_timeout = std::chrono::milliseconds(in.ConsumeIntegralInRange<int>(1, 60000));
  cfg.copy_batch = in.ConsumeIntegralInRange<std::size_t>(1, 70);
  cfg.max_packets_per_pass = in.ConsumeIntegralInRange<std::uint32_t>(1, 64);
  const auto per_call = in.ConsumeIntegralInRange<std::size_t>(1, 64);
  // Faults only when the input asks for them (an exhausted provider yields 0: no faults).
  const bool fail_calls = in.ConsumeProbability<float>() > 0.9f;
  w.fail_every = in.ConsumeProbability<float>() > 0.8f ? in.ConsumeIntegralInRange(1u, 40u) : 0;
  const RingIdx start{in.ConsumeBool() ? 0xFFFF'FF00u + in.ConsumeIntegral<std::uint8_t>() : 0u};

  BoundsCheckingGrantTable table(w, per_call, fail_calls);
  Frontend fe(w, start);
  vif::QueueCounters counters;
  auto back = ring::RxBackRing::attach(fe.page());
  FUZZ_CHECK(back.has_value());
  auto now = vif::RxPath::Clock::time_point{} + std::chrono::hours(1);
  std::uint32_t offered = 0;
  {
    vif::RxPath path(*back, table, cfg, counters);
    auto run_pass = [&] {
      const auto pass = path.process(now);
      FUZZ_CHECK(pass.packets <= cfg.max_packets_per_pass);
      (void)path.update_carrier(now);
      fe.drain(cfg);
    };
    for (int op = 0; op < 200 && in.remaining_bytes() > 0; ++op) {
      switch (in.ConsumeIntegralInRange(0, 3)) {
        case 0: fe.post(in, in.ConsumeIntegralInRange<std::uint32_t>(0, 80)); break;
        case 1: {
          const bool was_empty = path.empty();
          vif::RxPacket p = make_packet(in, w);
          Source& s = *w.packets.back();
          ++offered;  // RxPath owns it from here: its release says when it is done
          if (path.enqueue(std::move(p), now)) {
            if (!was_empty) FUZZ_CHECK(path.queued_bytes() <= cfg.queue_bytes);  // XSA-392
          } else {
            FUZZ_CHECK(s.released);  // a refused packet is given back at once
          }
          break;
        }
        case 2: run_pass(); break;
        case 3: now += std::chrono::milliseconds(in.ConsumeIntegralInRange(0, 15000)); break;
      }
    }
    // Drain: the frontend keeps posting until everything queued went out or expired.
    for (int round = 0; round < 400 && !path.empty(); ++round) {
      fe.post(in, fe.free_requests());
      run_pass();
    }
    FUZZ_CHECK(path.empty());
  }
  // RxPath is gone: every packet it ever took has been given back exactly once.
  for (auto& s : w.packets) FUZZ_CHECK(s->released);
  // Each packet offered was delivered or dropped for a counted reason.
  const std::uint64_t dropped =
      counters.rx_dropped_expired + counters.rx_dropped_too_big + counters.rx_dropped_queue_full;
  FUZZ_CHECK(counters.rx_packets == fe.delivered);
  FUZZ_CHECK(fe.delivered + dropped == offered);
  return 0;
}
