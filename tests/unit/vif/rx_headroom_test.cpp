// Guest RX with an XDP headroom (feature-xdp-headroom): a frontend plays Linux netfront with
// an XDP program attached (xdp-headroom 256) against RxPath over an in-memory grant table.
// Every packet's first byte lands at the headroom in its first buffer, the response's offset
// says so, the bytes arrive intact, and the packet still takes the fewest slots it can.
#include <array>
#include <cstring>
#include <gtest/gtest.h>
#include <vector>

#include "backend/vif/rx_path.hpp"
#include "common/wire/grant.hpp"
#include "tests/support/in_memory_grant_table.hpp"

namespace unetback::vif {
namespace {

constexpr DomId kFrontend{5};
using test::InMemoryGrantTable;
using test::Page;

struct Received {
  std::vector<wire::RxResponse> slots;  // data slots and extras, in ring order
  std::vector<std::byte> bytes;         // the data, reassembled from the buffers
  std::uint16_t first_offset = 0;
};

class RxHeadroom : public ::testing::Test {
 protected:
  RxHeadroom() : front_(ring::RxFrontRing::init(ring_page_.bytes)) {
    auto back = ring::RxBackRing::attach(ring_page_.bytes);
    EXPECT_TRUE(back);
    cfg_.frontend = kFrontend;
    cfg_.xdp_headroom = 256;
    rx_.emplace(*back, table_, cfg_, counters_);
  }

  void post_all() {
    while (front_.free_requests() > 0) {
      wire::RxRequest r{};
      r.id = next_id_;
      r.gref = next_id_ % InMemoryGrantTable::kPages;
      ++next_id_;
      front_.put_request(r);
    }
    (void)front_.push_requests();
  }

  /// Queues a `len`-byte packet of a counting pattern (seeded by len), with a GSO extra if
  /// `gso`, and delivers it.
  void deliver(std::uint32_t len, bool gso = false) {
    source_.assign(len, std::byte{0});
    for (std::uint32_t i = 0; i < len; ++i)
      source_[i] = static_cast<std::byte>((i * 7 + len) & 0xff);
    RxPacket p;
    p.frags[0] = RxFrag{hv::GrantCopyPtr::local(source_.data()), len};
    p.nr_frags = 1;
    p.len = len;
    if (gso) p.offload.gso = net::GsoInfo{wire::GsoType::tcpv4, 1448};
    ASSERT_TRUE(rx_->enqueue(std::move(p), std::chrono::steady_clock::now()));
    post_all();
    const auto pass = rx_->process(std::chrono::steady_clock::now());
    ASSERT_EQ(pass.packets, 1U);
  }

  /// Takes one packet's responses off the ring, reading each data slot as netfront does:
  /// `status` bytes at `offset` in the buffer of the request with the same ring index.
  Received take_packet() {
    Received out;
    bool more = true;
    bool extras = false;
    std::size_t data_slots = 0;
    while (more || extras) {
      EXPECT_GT(front_.unconsumed_responses(), 0U);
      if (front_.unconsumed_responses() == 0) break;
      const RingIdx at = front_.rsp_cons();
      const auto rsp = front_.take_response();
      out.slots.push_back(rsp);
      if (extras) {
        wire::ExtraInfo e;
        std::memcpy(&e, &rsp, sizeof e);
        extras = (e.flags & XEN_NETIF_EXTRA_FLAG_MORE) != 0;
        continue;
      }
      EXPECT_GE(rsp.status, 0);
      EXPECT_LE(rsp.offset + rsp.status, 4096);
      if (data_slots++ == 0) {
        out.first_offset = rsp.offset;
        extras = (rsp.flags & NETRXF_extra_info) != 0;
      } else {
        EXPECT_EQ(rsp.offset, 0) << "only slot 0 has a headroom";
      }
      const std::byte* page = table_.page(
          GrantRef{static_cast<std::uint32_t>(at.value() % InMemoryGrantTable::kPages)});
      out.bytes.insert(out.bytes.end(), page + rsp.offset, page + rsp.offset + rsp.status);
      more = (rsp.flags & NETRXF_more_data) != 0;
    }
    return out;
  }

  Page ring_page_{};
  ring::RxFrontRing front_;
  InMemoryGrantTable table_;
  QueueCounters counters_;
  RxConfig cfg_;
  std::optional<RxPath> rx_;
  std::uint16_t next_id_ = 0;
  std::vector<std::byte> source_;
};

TEST_F(RxHeadroom, EveryPacketStartsAtTheHeadroomIntactInTheFewestSlots) {
  for (const std::uint32_t len : {60u, 1514u, 3840u, 3841u, 9000u, 65226u}) {
    SCOPED_TRACE(len);
    deliver(len, /*gso=*/len > 9000);
    const Received got = take_packet();
    EXPECT_EQ(got.first_offset, 256);
    EXPECT_EQ(got.bytes, source_) << "the packet arrives intact after the headroom";
    const std::size_t extras = len > 9000 ? 1 : 0;
    EXPECT_EQ(got.slots.size(), rx_data_slots(len, 256) + extras);
    EXPECT_EQ(got.slots.front().status, std::min<std::uint32_t>(len, 4096 - 256));
  }
  // 3840 bytes fit one slot after 256 bytes of headroom, 3841 need two.
  EXPECT_EQ(counters_.rx_slots.load(), counters_.rx_min_slots.load())
      << "no slot beyond the minimum, the headroom counted";
  EXPECT_EQ(counters_.rx_slots.load(), 1U + 1 + 1 + 2 + 3 + (16 + 1));
}

TEST_F(RxHeadroom, AChangedHeadroomAppliesFromTheNextPacketOn) {
  deliver(1514);
  EXPECT_EQ(take_packet().first_offset, 256);
  rx_->set_xdp_headroom(0);  // the XDP program detached: netfront asks for 0 (7 -> 8 -> 4)
  deliver(4096);
  const Received flat = take_packet();
  EXPECT_EQ(flat.first_offset, 0);
  EXPECT_EQ(flat.slots.size(), 1U) << "a whole page again";
  EXPECT_EQ(flat.bytes, source_);
  rx_->set_xdp_headroom(512);
  deliver(4000);
  const Received again = take_packet();
  EXPECT_EQ(again.first_offset, 512);
  EXPECT_EQ(again.slots.size(), 2U);
  EXPECT_EQ(again.bytes, source_);
  EXPECT_EQ(counters_.rx_slots.load(), counters_.rx_min_slots.load());
}

TEST_F(RxHeadroom, AFrontendWithoutScatterGatherGetsOnlyWhatFitsAfterItsHeadroom) {
  cfg_.sg = false;
  rx_.reset();
  auto back = ring::RxBackRing::attach(ring_page_.bytes);
  ASSERT_TRUE(back);
  rx_.emplace(*back, table_, cfg_, counters_);
  deliver(3840);
  EXPECT_EQ(take_packet().bytes, source_);
  RxPacket p;
  std::vector<std::byte> big(3841);
  p.frags[0] = RxFrag{hv::GrantCopyPtr::local(big.data()), 3841};
  p.nr_frags = 1;
  p.len = 3841;
  ASSERT_TRUE(rx_->enqueue(std::move(p), std::chrono::steady_clock::now()));
  post_all();
  EXPECT_EQ(rx_->process(std::chrono::steady_clock::now()).packets, 0U);
  EXPECT_EQ(counters_.rx_dropped_too_big.load(), 1U) << "one slot only, and it would not fit";
  EXPECT_EQ(front_.unconsumed_responses(), 0U);
}

}  // namespace
}  // namespace unetback::vif
