// The data paths allocate nothing per packet in steady state: a frontend keeps both rings busy
// (guest TX of small, copied and mapped packets to a sink; guest RX of TAP-like packets into
// posted buffers), and after a warm-up the global operator new, replaced here by a counting
// one, is not called once for thousands of packets.
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <new>
#include <vector>

#include "backend/vif/packet_pool.hpp"
#include "backend/vif/rx_path.hpp"
#include "backend/vif/tx_path.hpp"
#include "common/wire/grant.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::size_t> g_allocations{0};

void* counted(std::size_t n, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(n == 0 ? 1 : n)
                : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) {
  return counted(n, 0);
}
void* operator new[](std::size_t n) {
  return counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace unetback::vif {
namespace {

constexpr DomId kFrontend{5};
constexpr std::uint32_t kPages = 1024;

struct alignas(4096) Page {
  std::byte bytes[4096];
};

/// The frontend's granted memory: ref r is page r. copy() performs each segment; map()
/// hands out consecutive pages of a private window holding copies of the granted ones
/// (enough to see that the backend reads the right bytes, with no allocation).
class InMemoryGrantTable final : public hv::BatchingGrantTable {
 public:
  InMemoryGrantTable() : BatchingGrantTable(64), pages_(new Page[kPages]), window_(new Page[256]) {}

  std::byte* page(GrantRef r) { return pages_[r.value() % kPages].bytes; }

  Result<hv::MappedGrants> map(DomId, std::span<const GrantRef> refs, hv::Access a) override {
    if (refs.size() > 256) return std::errc::no_buffer_space;
    for (std::size_t i = 0; i < refs.size(); ++i)
      std::memcpy(window_[i].bytes, page(refs[i]), sizeof(Page));
    ++maps;
    return hv::MappedGrants(this, window_[0].bytes, refs.size(), a);
  }
  void unmap(std::byte*, std::size_t) noexcept override {}
  std::size_t maps = 0;

 protected:
  bool copy_call(std::span<hv::GrantCopySegment> segs) noexcept override {
    for (auto& s : segs) {
      std::byte* src = s.source.foreign ? page(s.source.ref) + s.source.offset
                                        : static_cast<std::byte*>(s.source.virt);
      std::byte* dst =
          s.dest.foreign ? page(s.dest.ref) + s.dest.offset : static_cast<std::byte*>(s.dest.virt);
      std::memcpy(dst, src, s.len);
      s.status = GNTST_okay;
    }
    return true;
  }

 private:
  std::unique_ptr<Page[]> pages_;
  std::unique_ptr<Page[]> window_;
};

class CountingSink final : public PacketSink {
 public:
  std::error_code deliver(const net::VirtioNetHdr&, std::span<const iovec> frame) override {
    for (const auto& v : frame) bytes += v.iov_len;
    ++frames;
    return {};
  }
  std::size_t frames = 0, bytes = 0;
};

/// An IPv4/UDP frame of `len` bytes (no offloads requested: the headers are not parsed).
void write_frame(std::byte* at, std::uint32_t len, std::uint8_t fill) {
  std::memset(at, static_cast<int>(fill), len);
}

TEST(DatapathAllocations, GuestTxOfSmallCopiedAndMappedPacketsAllocatesNothingPerPacket) {
  InMemoryGrantTable table;
  Page ring_page{};
  auto front = ring::TxFrontRing::init(ring_page.bytes);
  auto back = ring::TxBackRing::attach(ring_page.bytes);
  ASSERT_TRUE(back);
  CountingSink sink;
  QueueCounters counters;
  TxConfig cfg;
  cfg.frontend = kFrontend;
  TxPath tx(*back, table, sink, cfg, counters);

  // 64 B (copied: below goodcopy-len), 1500 B (mapped past its linear header), and a
  // two-slot 6000-byte packet (mapped).
  std::uint32_t next_ref = 0;
  std::uint16_t next_id = 0;
  auto post = [&](std::uint32_t len) {
    const std::uint32_t first = std::min<std::uint32_t>(len, 4096);
    wire::TxRequest r{};
    r.gref = next_ref++ % kPages;
    r.offset = 0;
    r.size = static_cast<std::uint16_t>(len);
    r.id = next_id++;
    r.flags = len > first ? NETTXF_more_data : 0;
    write_frame(table.page(GrantRef{r.gref}), first, 0x11);
    front.put_request(r);
    if (len > first) {
      wire::TxRequest f{};
      f.gref = next_ref++ % kPages;
      f.size = static_cast<std::uint16_t>(len - first);
      f.id = next_id++;
      write_frame(table.page(GrantRef{f.gref}), len - first, 0x22);
      front.put_request(f);
    }
  };
  const std::array<std::uint32_t, 3> sizes{64, 1500, 6000};
  auto run = [&](int packets) {
    for (int i = 0; i < packets;) {
      for (int k = 0; k < 32 && i < packets; ++k, ++i) post(sizes[i % sizes.size()]);
      (void)front.push_requests();
      for (;;) {
        const auto pass = tx.process(std::chrono::steady_clock::now());
        ASSERT_FALSE(pass.fatal);
        if (!pass.more) break;
      }
      while (front.unconsumed_responses() > 0) {
        const auto rsp = front.take_response();
        ASSERT_EQ(rsp.status, 0);
      }
    }
  };
  run(3000);  // warm-up
  const std::size_t frames_before = sink.frames, maps_before = table.maps;
  g_allocations = 0;
  g_counting = true;
  run(30000);
  g_counting = false;
  EXPECT_EQ(sink.frames - frames_before, 30000u);
  EXPECT_GT(table.maps, maps_before) << "the mapped (zerocopy) path ran too";
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations across 30000 guest-TX packets";
}

TEST(DatapathAllocations, GuestRxOfTapFramesAllocatesNothingPerPacket) {
  InMemoryGrantTable table;
  Page ring_page{};
  auto front = ring::RxFrontRing::init(ring_page.bytes);
  auto back = ring::RxBackRing::attach(ring_page.bytes);
  ASSERT_TRUE(back);
  QueueCounters counters;
  RxConfig cfg;
  cfg.frontend = kFrontend;
  RxPath rx(*back, table, cfg, counters);
  PacketPool pool(64);

  std::uint16_t next_id = 0;
  auto post_all = [&] {
    while (front.free_requests() > 0) {
      wire::RxRequest r{};
      r.id = next_id;
      r.gref = next_id % kPages;
      ++next_id;
      front.put_request(r);
    }
    (void)front.push_requests();
  };
  std::size_t released = 0;
  auto enqueue = [&](std::uint32_t len) {
    const int buf = pool.take();
    ASSERT_GE(buf, 0);
    write_frame(pool.frame(buf), len, 0x33);
    RxPacket p;
    p.frags[0] = RxFrag{hv::GrantCopyPtr::local(pool.frame(buf)), len};
    p.nr_frags = 1;
    p.len = len;
    p.release = RxRelease(
        [](void* c, std::uintptr_t i) noexcept {
          static_cast<PacketPool*>(c)->give_back(static_cast<int>(i));
        },
        &pool, static_cast<std::uintptr_t>(buf));
    ASSERT_TRUE(rx.enqueue(std::move(p), std::chrono::steady_clock::now()));
  };
  const std::array<std::uint32_t, 3> sizes{64, 1500, 9000};
  std::size_t delivered = 0;
  auto run = [&](int packets) {
    for (int i = 0; i < packets;) {
      post_all();
      for (int k = 0; k < 48 && i < packets; ++k, ++i) enqueue(sizes[i % sizes.size()]);
      while (!rx.empty()) {
        (void)rx.process(std::chrono::steady_clock::now());
        while (front.unconsumed_responses() > 0) {
          const auto rsp = front.take_response();
          ASSERT_GT(rsp.status, 0);
          if ((rsp.flags & NETRXF_more_data) == 0) ++delivered;
        }
        post_all();
      }
    }
    released = pool.free_count();
  };
  run(3000);
  const std::size_t before = delivered;
  g_allocations = 0;
  g_counting = true;
  run(30000);
  g_counting = false;
  EXPECT_EQ(delivered - before, 30000u);
  EXPECT_EQ(released, pool.count()) << "every buffer back in the pool";
  EXPECT_EQ(g_allocations.load(), 0u) << "allocations across 30000 guest-RX packets";
}

}  // namespace
}  // namespace unetback::vif
