// Guest TX to a TAP, tx-map auto: a pass of big packets maps them or copies them, whichever this
// host makes cheaper, as the queue measures it. The grant table stands for the host: one where
// every map call is dear (a PV dom0, where a map is an ioctl, an mmap, a munmap and an unmap,
// each through Xen) and one where every copied KiB is. The costs differ by far more than any
// noise of the machine running the test, so the choice is never a close call.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/vif/tx_path.hpp"
#include "tests/support/in_memory_grant_table.hpp"

namespace unetback::vif {
namespace {

using namespace std::chrono_literals;
constexpr DomId kFrontend{5};
constexpr std::uint32_t kLen = 1500;  // above goodcopy-len: the limiter lets it go zerocopy
constexpr int kPerPass = 8;

class CountingSink final : public PacketSink {
 public:
  std::error_code deliver(const net::VirtioNetHdr&, std::span<const iovec> frame) override {
    std::size_t n = 0;
    for (const auto& v : frame) {
      for (std::size_t i = 0; i < v.iov_len; ++i)
        if (static_cast<const std::byte*>(v.iov_base)[i] != std::byte{0x5a}) ++wrong_bytes;
      n += v.iov_len;
    }
    bytes += n;
    ++frames;
    return {};
  }
  std::size_t frames = 0, bytes = 0, wrong_bytes = 0;
};

struct Guest {
  test::InMemoryGrantTable table;
  test::Page ring_page{};
  ring::TxFrontRing front = ring::TxFrontRing::init(ring_page.bytes);
  CountingSink sink;
  QueueCounters counters;
  std::uint32_t next_ref = 0;
  std::uint16_t next_id = 0;

  /// `passes` passes of kPerPass packets of kLen bytes each; every response must be OKAY.
  void stream(TxPath& tx, int passes) {
    for (int p = 0; p < passes; ++p) {
      for (int k = 0; k < kPerPass; ++k) {
        wire::TxRequest r{};
        r.gref = next_ref++ % test::InMemoryGrantTable::kPages;
        r.size = kLen;
        r.id = next_id++;
        std::memset(table.page(GrantRef{r.gref}), 0x5a, kLen);
        front.put_request(r);
      }
      (void)front.push_requests();
      const auto pass = tx.process(std::chrono::steady_clock::now());
      ASSERT_FALSE(pass.fatal);
      while (front.unconsumed_responses() > 0) ASSERT_EQ(front.take_response().status, 0);
    }
  }
  TxPath path(zerocopy::MapMode mode) {
    auto back = ring::TxBackRing::attach(ring_page.bytes);
    EXPECT_TRUE(back);
    TxConfig cfg;
    cfg.frontend = kFrontend;
    cfg.map_mode = mode;
    return TxPath(*back, table, sink, cfg, counters);
  }
  [[nodiscard]] std::uint64_t copied_for_cost() const { return counters.tx_copy_for_cost.load(); }
};

TEST(TxMapChoice, WhereEveryMapIsDearTheQueueCopiesItsBigPackets) {
  Guest g;
  g.table.map_spin = 400us;
  TxPath tx = g.path(zerocopy::MapMode::auto_choice);
  g.stream(tx, 64);  // warm-up: both ways tried
  const auto maps0 = g.table.maps;
  const auto copied0 = g.copied_for_cost();
  g.stream(tx, 320);
  const auto packets = 320u * kPerPass;
  const auto copied = g.copied_for_cost() - copied0;
  EXPECT_GE(copied, packets * 9 / 10) << "most big packets copied";
  EXPECT_LT(copied, packets) << "one pass in " << zerocopy::MapChooser::kExploreEvery
                             << " still maps, to keep its figure current";
  EXPECT_GT(g.table.maps, maps0);
  EXPECT_GT(tx.map_chooser().map_ns_per_kib(), tx.map_chooser().copy_ns_per_kib());
  EXPECT_EQ(g.sink.frames, (64u + 320u) * kPerPass);
  EXPECT_EQ(g.sink.wrong_bytes, 0u) << "copied or mapped, the frames carry the guest's bytes";
}

TEST(TxMapChoice, WhereEveryCopiedKibIsDearTheQueueMapsPastTheHeader) {
  Guest g;
  g.table.copy_spin_per_kib = 100us;  // a mapped packet copies only its 256-byte header
  TxPath tx = g.path(zerocopy::MapMode::auto_choice);
  g.stream(tx, 64);
  const auto maps0 = g.table.maps;
  const auto copied0 = g.copied_for_cost();
  g.stream(tx, 320);
  EXPECT_GE(g.table.maps - maps0, 320u * 9 / 10) << "most passes mapped";
  EXPECT_LE(g.copied_for_cost() - copied0, 320u * kPerPass / 10);
  EXPECT_LT(tx.map_chooser().map_ns_per_kib(), tx.map_chooser().copy_ns_per_kib());
  EXPECT_EQ(g.sink.wrong_bytes, 0u);
}

TEST(TxMapChoice, AlwaysAndNeverIgnoreTheCosts) {
  Guest dear_maps;
  dear_maps.table.map_spin = 400us;
  TxPath always = dear_maps.path(zerocopy::MapMode::always);
  dear_maps.stream(always, 40);
  EXPECT_EQ(dear_maps.table.maps, 40u) << "tx-map always: every pass maps";
  EXPECT_EQ(dear_maps.copied_for_cost(), 0u);

  Guest dear_copies;
  dear_copies.table.copy_spin_per_kib = 100us;
  TxPath never = dear_copies.path(zerocopy::MapMode::never);
  dear_copies.stream(never, 40);
  EXPECT_EQ(dear_copies.table.maps, 0u) << "tx-map never: nothing is mapped";
  EXPECT_EQ(dear_copies.copied_for_cost(), 40u * kPerPass);
  EXPECT_EQ(dear_copies.sink.wrong_bytes, 0u);
}

}  // namespace
}  // namespace unetback::vif
